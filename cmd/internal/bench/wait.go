package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// WaitConfig configures RunWait.
type WaitConfig struct {
	// DynamoDBEndpoint (with Region) and RedisAddr reach the stores; an
	// empty one is skipped.
	DynamoDBEndpoint, Region, RedisAddr string
	// N is the waiting requests per store and run length (default 10).
	N int
	// Lengths are how long the first run lasts after its waiter arrives
	// (default 200 ms, 1 s and 5 s).
	Lengths []time.Duration
	// Progress gets a line per store and length; nil discards them.
	Progress io.Writer
}

// WaitRow is what the waiting requests of one store and run length cost.
type WaitRow struct {
	Store  string
	Length time.Duration
	// Waiters is how many waiting requests were measured.
	Waiters int
	// Ops are the requests the store received from the waiters, by
	// operation (DynamoDB) or command (Redis); Max the most one waiter
	// made.
	Ops map[string]int
	Max int
	// Ceiling is the most requests a waiter makes by the poll schedule:
	// WaitCeiling of Length and 100 ms for the first run's completion to
	// be written.
	Ceiling int
	// After is the time from the first call's return to its waiter's.
	After Dist
}

// PerWaiter is the mean of requests per waiting request.
func (r WaitRow) PerWaiter() float64 {
	total := 0
	for _, n := range r.Ops {
		total += n
	}
	if r.Waiters == 0 {
		return 0
	}
	return float64(total) / float64(r.Waiters)
}

// WaitResult is the outcome of RunWait.
type WaitResult struct {
	N    int
	Rows []WaitRow
}

// WaitCeiling is how many requests a call waiting for a run whose outcome
// is written d after the call started makes at most: its refused claim,
// the reads of the record the poll schedule fits in d if every pause is
// the shortest it draws (half of its interval), and the read that finds
// the outcome.
func WaitCeiling(d time.Duration) int {
	reads, at := 0, time.Duration(0)
	for interval := lambdaidem.WaitPollStart; ; interval = min(2*interval, lambdaidem.WaitPollCap) {
		at += interval / 2
		if at >= d {
			break
		}
		reads++
	}
	return 1 + reads + 1
}

// RunWait measures lambdaidem.WithWaitForCompletion on each store it
// reaches: for each run length, N times, a first call starts and holds its
// run; a second call with the same key and payload starts through a
// counting proxy and waits; the first run ends Length after the second
// call's claim was answered. It reports the requests the store received from each
// waiting call, and the time from the first call's return to the waiting
// call's, which the poll schedule decides. The calls run one pair at a
// time.
func RunWait(ctx context.Context, cfg WaitConfig) (*WaitResult, error) {
	if cfg.N <= 0 {
		cfg.N = 10
	}
	if len(cfg.Lengths) == 0 {
		cfg.Lengths = []time.Duration{200 * time.Millisecond, time.Second, 5 * time.Second}
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	res := &WaitResult{N: cfg.N}
	type storePair struct {
		name            string
		direct, counted idemstore.Store
		counts          func() map[string]int
		reset           func()
	}
	var stores []storePair
	if cfg.DynamoDBEndpoint != "" {
		client := NewClient(cfg.DynamoDBEndpoint, cfg.Region, 2)
		table := harness.UniqueName("lambdaidem-bench-wait")
		fmt.Fprintf(cfg.Progress, "wait for completion: creating table %s\n", table)
		if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 50 * time.Millisecond}); err != nil {
			return nil, err
		}
		defer func() { _ = deleteTable(client, table) }()
		p, err := faultproxy.New(cfg.DynamoDBEndpoint)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		stores = append(stores, storePair{
			name: "DynamoDB Local", direct: dynamo.New(client, table),
			counted: dynamo.New(NewClient(p.URL(), cfg.Region, 2), table),
			counts:  func() map[string]int { return opCounts(p) }, reset: p.ResetCounts,
		})
	}
	if cfg.RedisAddr != "" {
		prefix := harness.UniqueName("lambdaidem-bench-wait")
		client := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
		defer client.Close()
		direct := redisstore.New(client, prefix)
		if err := direct.LoadScripts(ctx); err != nil {
			return nil, err
		}
		p, err := faultproxy.NewRESP(cfg.RedisAddr)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		pc := redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer pc.Close()
		// Connect before counting: the handshake is not a store request.
		if err := pc.Ping(ctx).Err(); err != nil {
			return nil, err
		}
		stores = append(stores, storePair{
			name: "redis-server", direct: direct, counted: redisstore.New(pc, prefix),
			counts: p.Counts, reset: p.ResetCounts,
		})
	}
	if len(stores) == 0 {
		return nil, errors.New("bench: wait for completion needs DynamoDB Local or redis-server")
	}

	type input struct {
		Key string `json:"key"`
	}
	for _, st := range stores {
		for _, length := range cfg.Lengths {
			fmt.Fprintf(cfg.Progress, "wait for completion on %s: %d waiting requests on runs of %s\n", st.name, cfg.N, length)
			row := WaitRow{Store: st.name, Length: length, Ops: map[string]int{}, Ceiling: WaitCeiling(length + 100*time.Millisecond)}
			opts := []lambdaidem.Option{lambdaidem.WithNamespace(Namespace + "-wait"), lambdaidem.WithLogger(quietLogger()),
				lambdaidem.WithKeyJSONField("key")}
			for range cfg.N {
				release, started := make(chan struct{}), make(chan struct{})
				first := lambdaidem.Wrap(st.direct, func(ctx context.Context, in input) (string, error) {
					close(started)
					<-release
					return "receipt of " + in.Key, nil
				}, opts...)
				claimed := &firstClaim{Store: st.counted, done: make(chan struct{})}
				waiting := lambdaidem.Wrap(claimed, func(context.Context, input) (string, error) {
					return "", errors.New("bench: the waiting call ran the function")
				}, append(opts, lambdaidem.WithWaitForCompletion(time.Minute))...)
				in := input{Key: newID()}
				firstDone := make(chan time.Time, 1)
				firstErr := make(chan error, 1)
				go func() {
					_, err := first(ctx, in)
					firstDone <- time.Now()
					firstErr <- err
				}()
				select {
				case <-started:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				st.reset()
				waited := make(chan error, 1)
				var waiterDone time.Time
				go func() {
					out, err := waiting(ctx, in)
					waiterDone = time.Now()
					if err == nil && out != "receipt of "+in.Key {
						err = fmt.Errorf("bench: the waiting call returned %q", out)
					}
					waited <- err
				}()
				// The first run lasts length after the waiter's claim was
				// refused, so the waiter always finds it in progress,
				// however slow the machine.
				select {
				case <-claimed.done:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				select {
				case <-time.After(length):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				close(release)
				done := <-firstDone
				if err := <-firstErr; err != nil {
					return nil, fmt.Errorf("bench: the first call: %w", err)
				}
				if err := <-waited; err != nil {
					return nil, fmt.Errorf("bench: the waiting call: %w", err)
				}
				row.After.Add(waiterDone.Sub(done))
				n := 0
				for op, c := range st.counts() {
					row.Ops[op] += c
					n += c
				}
				row.Max = max(row.Max, n)
				row.Waiters++
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// Write writes the table of RunWait's rows.
func (r *WaitResult) Write(w io.Writer) {
	fmt.Fprintf(w, "| store | first run lasts | waiting requests | requests / waiting request | most | by operation | at most, by the schedule | first call's return to the waiter's: p50 | p99 |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, row := range r.Rows {
		var ops []string
		for _, op := range slices.Sorted(maps.Keys(row.Ops)) {
			ops = append(ops, fmt.Sprintf("%s %s", op, num(float64(row.Ops[op])/float64(max(row.Waiters, 1)))))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %d | %s | %d | %s | %s |\n", row.Store, row.Length, row.Waiters, num(row.PerWaiter()),
			row.Max, strings.Join(ops, ", "), row.Ceiling, ms(row.After.P50()), ms(row.After.P99()))
	}
}

// firstClaim is a store that closes done once its first claim is answered.
type firstClaim struct {
	idemstore.Store
	once sync.Once
	done chan struct{}
}

func (f *firstClaim) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	res, err := f.Store.Claim(ctx, req)
	f.once.Do(func() { close(f.done) })
	return res, err
}

// Unwrap is the store counted, so its declarations are checked.
func (f *firstClaim) Unwrap() idemstore.Store { return f.Store }
