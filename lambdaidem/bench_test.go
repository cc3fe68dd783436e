package lambdaidem_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// The per-record overhead of the decorator with the in-memory store, next
// to a bare handler: batches of 10 records, message-ID keys, a logger at
// WARN (no per-record INFO lines). ns/record and allocs/record are the
// figures to compare; see the README for recorded results.

func benchBatches(b *testing.B, bodySize int, unique bool) func(i int) events.SQSEvent {
	body := strings.Repeat("x", bodySize)
	fixed := make([]events.SQSMessage, 10)
	for j := range fixed {
		fixed[j] = msg("fixed-"+strconv.Itoa(j), body)
	}
	return func(i int) events.SQSEvent {
		if !unique {
			return events.SQSEvent{Records: fixed}
		}
		recs := make([]events.SQSMessage, 10)
		for j := range recs {
			recs[j] = fixed[j]
			recs[j].MessageId = strconv.Itoa(i*10 + j)
		}
		return events.SQSEvent{Records: recs}
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// runBench runs b.N batches from a pool of prebuilt events. When the pool
// wraps around, fresh() (if set) gives a new handler over an empty store, so
// first deliveries stay first deliveries.
func runBench(b *testing.B, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error),
	fresh func() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), next func(int) events.SQSEvent) {
	runBenchPer(b, h, fresh, next, 10)
}

// runBenchPer is runBench for batches of perBatch records.
func runBenchPer(b *testing.B, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error),
	fresh func() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), next func(int) events.SQSEvent, perBatch int) {
	// Lambda always gives the invocation a deadline, at most 15 minutes
	// away (so the lease runs to it).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const pool = 2048
	evs := make([]events.SQSEvent, pool)
	for i := range evs {
		evs[i] = next(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if i%pool == 0 && i > 0 && fresh != nil {
			b.StopTimer()
			h = fresh()
			b.StartTimer()
		}
		if _, err := h(ctx, evs[i%pool]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/record")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*perBatch), "cpu-ns/record")
}

// processCPU is the CPU time the process has used so far, every thread's
// (the collector's included). On a machine other work keeps busy, it
// varies far less than the wall time per record.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkSQS(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		name := strconv.Itoa(size>>10) + "KB"
		b.Run("bare/"+name, func(b *testing.B) {
			h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				for _, m := range ev.Records {
					_ = ok(ctx, m)
				}
				return events.SQSEventResponse{}, nil
			}
			runBench(b, h, nil, benchBatches(b, size, true))
		})
		b.Run("first/"+name, func(b *testing.B) {
			fresh := func() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return lambdaidem.SQS(memstore.New(), ok, lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()))
			}
			runBench(b, fresh(), fresh, benchBatches(b, size, true))
		})
		b.Run("first-nopstore/"+name, func(b *testing.B) {
			// The decorator's own share: a store that grants every claim
			// and accepts every write, without bookkeeping.
			h := lambdaidem.SQS(nopStore{}, ok, lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()))
			runBench(b, h, nil, benchBatches(b, size, true))
		})
		b.Run("duplicate-one/"+name, func(b *testing.B) {
			// An invocation of one duplicate record, as the Redis and
			// DynamoDB benchmarks send it: the invocation's own cost shows.
			store := memstore.New()
			h := lambdaidem.SQS(store, ok, lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()))
			one := func(i int) events.SQSEvent {
				return events.SQSEvent{Records: benchBatches(b, size, false)(0).Records[:1]}
			}
			if _, err := h(context.Background(), one(0)); err != nil {
				b.Fatal(err)
			}
			runBenchPer(b, h, nil, one, 1)
		})
		b.Run("duplicate/"+name, func(b *testing.B) {
			store := memstore.New()
			h := lambdaidem.SQS(store, ok, lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()))
			next := benchBatches(b, size, false)
			if _, err := h(context.Background(), next(0)); err != nil {
				b.Fatal(err)
			}
			runBench(b, h, nil, next)
		})
		b.Run("cached/"+name, func(b *testing.B) {
			h := lambdaidem.SQS(memstore.New(), ok, lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()),
				lambdaidem.WithCache(1000, 1<<40))
			next := benchBatches(b, size, false)
			if _, err := h(context.Background(), next(0)); err != nil {
				b.Fatal(err)
			}
			runBench(b, h, nil, next)
		})
	}
}

// nopStore grants every claim and accepts every write.
type nopStore struct{ lambdaidem.Store }

func (nopStore) Claim(_ context.Context, r idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	return idemstore.ClaimResult{Claimed: true, Lease: lambdaidem.Lease{
		Namespace: r.Namespace, Key: r.Key, Token: "t", Until: r.LeaseUntil, Attempt: 1,
		Fence: idemstore.Fence{Generation: "g", Claim: 1},
	}}, nil
}

func (nopStore) Complete(context.Context, idemstore.CompleteRequest) error { return nil }

// BenchmarkWrap is the per-call overhead of Wrap with the in-memory store:
// a first call (claim, run, store the result) and a repeated one (the
// stored result replayed), the input keyed by a JSON field and hashed
// whole, next to the bare function.
func BenchmarkWrap(b *testing.B) {
	type input struct {
		ID   string `json:"id"`
		Body string `json:"body"`
	}
	type output struct {
		Charge string `json:"charge"`
	}
	fn := func(_ context.Context, in input) (output, error) { return output{Charge: "ch-" + in.ID}, nil }
	body := strings.Repeat("x", 1<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := []lambdaidem.Option{lambdaidem.WithNamespace("bench"), lambdaidem.WithLogger(quietLogger()), lambdaidem.WithKeyJSONField("id")}
	const pool = 4096
	ins := make([]input, pool)
	for i := range ins {
		ins[i] = input{ID: "o-" + strconv.Itoa(i), Body: body}
	}
	call := func(b *testing.B, f func(context.Context, input) (output, error), fresh func() func(context.Context, input) (output, error)) {
		b.ReportAllocs()
		cpu0 := processCPU()
		n := 0
		for ; b.Loop(); n++ {
			if n%pool == 0 && n > 0 && fresh != nil {
				b.StopTimer()
				f = fresh()
				b.StartTimer()
			}
			if _, err := f(ctx, ins[n%pool]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
	}
	b.Run("bare/1KB", func(b *testing.B) { call(b, fn, nil) })
	b.Run("first/1KB", func(b *testing.B) {
		fresh := func() func(context.Context, input) (output, error) {
			return lambdaidem.Wrap(memstore.New(), fn, opts...)
		}
		call(b, fresh(), fresh)
	})
	b.Run("repeat/1KB", func(b *testing.B) {
		f := lambdaidem.Wrap(memstore.New(), fn, opts...)
		for _, in := range ins {
			if _, err := f(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		call(b, f, nil)
	})
}
