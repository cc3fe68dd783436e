package otelidem_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
)

// The in-process cost of tracing, beside lambdaidem's BenchmarkSQS: the
// decorator over a store that grants every claim and accepts every write
// (the decorator's own share), batches of 10 first deliveries of 1 KB,
// without an observer ("off") and with otelidem on the SDK's tracer
// provider, every span sampled and handed to a batching processor whose
// exporter discards them ("traced"), one invocation in ten sampled, as
// functions usually trace ("traced-1in10"), and with the metrics too
// ("traced+metrics", a manual reader). "sdk-floor" is the SDK alone making
// the same spans with the same number of attributes, without the
// decorator: traced - off - sdk-floor is otelidem's own share. ns/record and cpu-ns/record (the
// process's CPU time, every thread, per record: the figure a loaded
// machine does not distort) are the figures to compare.
func BenchmarkTracing(b *testing.B) {
	cases := []struct {
		name string
		obs  func(b *testing.B) lambdaidem.Option
	}{
		{"off", func(*testing.B) lambdaidem.Option { return nil }},
		{"traced", func(b *testing.B) lambdaidem.Option {
			return lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(benchProvider(b))))
		}},
		{"traced-1in10", func(b *testing.B) lambdaidem.Option {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0.1)))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(tp)))
		}},
		{"traced+metrics", func(b *testing.B) lambdaidem.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(benchProvider(b)), otelidem.WithMeterProvider(mp)))
		}},
	}
	b.Run("sdk-floor", func(b *testing.B) {
		// What the SDK alone costs for the same spans: one per batch and
		// one per record, with as many attributes as otelidem sets on a
		// first delivery (6 and 9), and no decorator.
		tr := benchProvider(b).Tracer("floor")
		h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			ictx, inv := tr.Start(ctx, "process orders", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
				attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.operation.name", "process"), attribute.String("messaging.destination.name", "orders"),
				attribute.Int("messaging.batch.message_count", len(ev.Records)), attribute.String("lambdaidem.namespace", "bench")))
			for _, m := range ev.Records {
				_, span := tr.Start(ictx, "lambdaidem bench", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
					attribute.String("lambdaidem.namespace", "bench"), attribute.String("lambdaidem.key.sha256", m.MessageId),
					attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.operation.type", "process"),
					attribute.String("messaging.operation.name", "process"), attribute.String("messaging.destination.name", "orders"),
					attribute.String("messaging.message.id", m.MessageId)))
				span.SetAttributes(attribute.String("lambdaidem.outcome", "processed"), attribute.Int("lambdaidem.attempt", 1))
				span.End()
			}
			inv.SetAttributes(attribute.Int("lambdaidem.failed", 0))
			inv.End()
			return events.SQSEventResponse{}, nil
		}
		runBatches(b, h)
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			opts := []lambdaidem.Option{lambdaidem.WithNamespace("bench"),
				lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})))}
			if o := c.obs(b); o != nil {
				opts = append(opts, o)
			}
			h := lambdaidem.SQS(nopStore{}, func(context.Context, events.SQSMessage) error { return nil }, opts...)
			runBatches(b, h)
		})
	}
}

// benchProvider is the SDK's tracer provider, sampling every span, with a
// batching processor and an exporter that drops what it is given.
func benchProvider(b *testing.B) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// runBatches runs b.N batches of 10 distinct 1 KB messages under a
// deadline, as Lambda gives one.
func runBatches(b *testing.B, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	body := strings.Repeat("x", 1<<10)
	const pool = 1024
	evs := make([]events.SQSEvent, pool)
	for i := range evs {
		recs := make([]events.SQSMessage, 10)
		for j := range recs {
			id := strconv.Itoa(i*10 + j)
			recs[j] = events.SQSMessage{MessageId: id, Body: body, EventSourceARN: queueARN, ReceiptHandle: "rh-" + id,
				Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
		}
		evs[i] = events.SQSEvent{Records: recs}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := h(ctx, evs[i%pool]); err != nil {
			b.Fatal(err)
		}
	}
	cpu = cpuTime() - cpu
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/record")
	// On a shared machine wall time counts the other processes too; the
	// process's CPU time is this code's own.
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*10), "cpu-ns/record")
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
