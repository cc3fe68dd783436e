package lambdaidem_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/memstore"
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
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/record")
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

func (nopStore) Claim(_ context.Context, r lambdaidem.ClaimRequest) (lambdaidem.ClaimResult, error) {
	return lambdaidem.ClaimResult{Claimed: true, Lease: lambdaidem.Lease{
		Namespace: r.Namespace, Key: r.Key, Token: "t", Until: r.LeaseUntil, Attempt: 1,
		Fence: lambdaidem.Fence{Generation: "g", Claim: 1},
	}}, nil
}

func (nopStore) Complete(context.Context, lambdaidem.CompleteRequest) error { return nil }
