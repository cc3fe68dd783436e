package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/chaos"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// TestRun is the small chaos run of `make test`: a few hundred messages
// through the real bootstrap under two pollers, in both modes at once on
// the DynamoDB store and on the Redis store, and in the optimistic mode
// and tx mode with batched writes on DynamoDB, with every kind of fault. It
// fails on any broken invariant and prints the table (and the seed, to
// replay with) either way.
func TestRun(t *testing.T) {
	ddb := testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	sqsEP := testenv.Endpoint(t, testenv.SQSEndpointVar)
	if testing.Short() {
		t.Skip("the chaos run takes tens of seconds")
	}
	bootstrap, err := chaos.BuildFunction(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	// Both modes run a second time on the Redis store.
	type run struct {
		name    string
		mode    chaos.Mode
		store   chaos.Store
		batched bool
	}
	runs := []run{
		{"plain", chaos.ModePlain, chaos.StoreDynamoDB, false}, {"tx", chaos.ModeTx, chaos.StoreDynamoDB, false},
		{"plain-redis", chaos.ModePlain, chaos.StoreRedis, false}, {"tx-redis", chaos.ModeTx, chaos.StoreRedis, false},
		{"optimistic", chaos.ModeOptimistic, chaos.StoreDynamoDB, false}, {"tx-batched", chaos.ModeTx, chaos.StoreDynamoDB, true},
	}

	var mu sync.Mutex
	reports := map[string]chaos.Report{}
	t.Cleanup(func() {
		var rs []chaos.Report
		for _, r := range runs {
			if r, ok := reports[r.name]; ok {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			var b bytes.Buffer
			chaos.Print(&b, rs...)
			t.Log("\n" + b.String())
		}
	})
	t.Run("modes", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				cfg := chaos.DefaultConfig(r.mode)
				cfg.Batched = r.batched
				cfg.Messages = 250
				if r.store == chaos.StoreRedis {
					cfg.Store, cfg.RedisAddr = r.store, testenv.RedisAddr(t)
					cfg.Messages = 150
				}
				cfg.Seed = seed
				cfg.Bootstrap = bootstrap
				cfg.DynamoDBEndpoint, cfg.SQSEndpoint = ddb, sqsEP
				if r := os.Getenv("AWS_REGION"); r != "" {
					cfg.Region = r
				}
				cfg.DrainTimeout = 3 * time.Minute
				rep, err := chaos.Run(context.Background(), cfg)
				mu.Lock()
				if rep.Mode != "" {
					reports[r.name] = rep
				}
				mu.Unlock()
				switch {
				case errors.Is(err, chaos.ErrInvariant):
					t.Fatalf("seed %d: %v", seed, err)
				case err != nil:
					t.Fatalf("seed %d: the run did not complete: %v", seed, err)
				}
				// The run must have exercised what it claims to.
				if rep.Messages != cfg.Messages || rep.DuplicateSends == 0 || rep.Poison == 0 {
					t.Errorf("workload not as configured: %+v", rep)
				}
				crashes := 0
				for _, n := range rep.CrashesSeen {
					crashes += n
				}
				if crashes == 0 || rep.Invocations["crash"] == 0 {
					t.Errorf("no crash happened: crash lines %v, invocations %v", rep.CrashesSeen, rep.Invocations)
				}
				if rep.Effects == 0 {
					t.Error("no effect at all")
				}
			})
		}
	})
}

// TestRunChain is the small chain run of `make test`: the chain example's
// two stages under crashes after the send and after the email, email API
// faults, store faults and duplicate sends, in the three chain modes at
// once. It fails on a lost order, a notification under another key than
// its order's effect key, or (chain-amo, chain-keyed) a second email.
func TestRunChain(t *testing.T) {
	ddb := testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	sqsEP := testenv.Endpoint(t, testenv.SQSEndpointVar)
	if testing.Short() {
		t.Skip("the chain run takes tens of seconds")
	}
	bootstrap, err := localrun.Build(context.Background(), chaos.ChainPackage, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	var reports []chaos.ChainReport
	t.Cleanup(func() {
		var b bytes.Buffer
		chaos.PrintChain(&b, reports...)
		t.Log("\n" + b.String())
	})
	t.Run("modes", func(t *testing.T) {
		for _, mode := range chaos.ChainModes {
			t.Run(string(mode), func(t *testing.T) {
				t.Parallel()
				cfg := chaos.DefaultConfig(mode)
				cfg.Messages, cfg.Seed, cfg.Bootstrap = 120, seed, bootstrap
				cfg.CrashRate, cfg.EmailFaultRate = 0.10, 0.10
				cfg.DynamoDBEndpoint, cfg.SQSEndpoint = ddb, sqsEP
				if r := os.Getenv("AWS_REGION"); r != "" {
					cfg.Region = r
				}
				cfg.DrainTimeout = 3 * time.Minute
				rep, err := chaos.RunChain(context.Background(), cfg)
				mu.Lock()
				if rep.Mode != "" {
					reports = append(reports, rep)
				}
				mu.Unlock()
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if rep.Orders != cfg.Messages || rep.Emails == 0 || rep.Notifications == 0 || rep.Crashes[chaos.CrashAfterSend] == 0 || rep.ProcessRestart == 0 {
					t.Errorf("the run did not exercise what it claims: %+v", rep)
				}
			})
		}
	})
}

func TestWorkloadIsSeeded(t *testing.T) {
	t.Parallel()
	cfg := chaos.DefaultConfig(chaos.ModePlain)
	cfg.Messages = 2000
	cfg.Seed = 12345
	a, b := chaos.NewWorkload(cfg), chaos.NewWorkload(cfg)
	if !slices.Equal(a.Order, b.Order) {
		t.Fatal("the same seed gave two different send orders")
	}
	for i := range a.Messages {
		if a.Messages[i] != b.Messages[i] {
			t.Fatalf("message %d differs: %+v vs %+v", i, a.Messages[i], b.Messages[i])
		}
	}
	cfg.Seed = 54321
	if c := chaos.NewWorkload(cfg); slices.Equal(a.Order, c.Order) {
		t.Error("another seed gave the same send order")
	}

	crash := map[string]int{}
	poison, slow, dups := 0, 0, 0
	sends := map[int]int{}
	for _, m := range a.Messages {
		if m.Crash != "" {
			crash[m.Crash]++
			if !strings.Contains(m.Body(chaos.KeyField), `"crash_attempts":[1]`) {
				t.Errorf("crash message %s crashes beyond its first attempt: %s", m.Key, m.Body(chaos.KeyField))
			}
		}
		if m.Poison {
			poison++
		}
		if m.Sleep > 0 {
			slow++
		}
		if m.Copies == 2 {
			dups++
		}
	}
	for _, i := range a.Order {
		sends[i]++
	}
	for i, m := range a.Messages {
		if sends[i] != m.Copies {
			t.Errorf("message %s sent %d times, want %d", m.Key, sends[i], m.Copies)
		}
	}
	for _, p := range chaos.CrashPoints {
		if crash[p] < 30 || crash[p] > 35 {
			t.Errorf("crash point %s on %d messages, want about a third of 5%% of 2000", p, crash[p])
		}
	}
	if poison != 10 || slow != 10 || dups != 400 {
		t.Errorf("poison %d, slow %d, duplicated %d; want 10, 10, 400", poison, slow, dups)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*chaos.Config){
		"mode":       func(c *chaos.Config) { c.Mode = "exactly" },
		"endpoints":  func(c *chaos.Config) { c.SQSEndpoint = "" },
		"visibility": func(c *chaos.Config) { c.Visibility = 1500 * time.Millisecond },
		"rate":       func(c *chaos.Config) { c.CrashRate = 1.5 },
		"batch":      func(c *chaos.Config) { c.BatchSize = 11 },
		"store":      func(c *chaos.Config) { c.Store = "memcached" },
		"redis addr": func(c *chaos.Config) { c.Store = chaos.StoreRedis },
		"batched optimistic": func(c *chaos.Config) {
			c.Mode, c.Batched = chaos.ModeOptimistic, true
		},
		"chain on redis": func(c *chaos.Config) {
			c.Mode, c.Store, c.RedisAddr = chaos.ModeChainAMO, chaos.StoreRedis, "127.0.0.1:1"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := chaos.DefaultConfig(chaos.ModeTx)
			cfg.DynamoDBEndpoint, cfg.SQSEndpoint = "http://127.0.0.1:1", "http://127.0.0.1:1"
			mutate(&cfg)
			if _, err := chaos.Run(context.Background(), cfg); !errors.Is(err, chaos.ErrInvalidConfig) {
				t.Errorf("Run: %v, want ErrInvalidConfig", err)
			}
		})
	}
}
