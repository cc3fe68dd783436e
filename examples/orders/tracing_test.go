package main

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambdaidem/go-lambdaidem/examples/internal/esm"
	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// printedSpan is what the console exporter prints of a span, as far as
// this test reads it.
type printedSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s printedSpan) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// spanLines collects the spans among the function's output lines (the
// rest is logs and metrics).
type spanLines struct {
	mu    sync.Mutex
	spans []printedSpan
}

func (c *spanLines) line(b []byte) {
	var s printedSpan
	if json.Unmarshal(b, &s) != nil || s.Name == "" || s.SpanContext.SpanID == "" {
		return
	}
	c.mu.Lock()
	c.spans = append(c.spans, s)
	c.mu.Unlock()
}

func (c *spanLines) all() []printedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// TestTracedUnderTheRunner runs the bootstrap under the local runner with
// OTEL_TRACES_EXPORTER=console. A producer sends an order inside a span of
// its own, with the trace context as a message attribute; the function's
// record span must link to that span, sit under its invocation's span, and
// hold the effect's write.
func TestTracedUnderTheRunner(t *testing.T) {
	bin := esm.Build(t, ".", runtime.GOOS, runtime.GOARCH)
	b := setup(t, 0)

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	p := producer.New(b.queue.Client, b.queue.URL, producer.WithTraceContext(otelidem.TraceInjector(propagation.TraceContext{})))
	ctx, send := tp.Tracer("checkout").Start(t.Context(), "place order")
	sent, err := p.Send(ctx, producer.Message{Key: "t-1", Body: `{"order_id":"t-1"}`})
	send.End()
	if err != nil {
		t.Fatal(err)
	}

	out := &spanLines{}
	log := &lineLog{t: t}
	r, err := localrun.New(localrun.Config{
		Bootstrap:               bin,
		QueueURL:                b.queue.URL,
		SQS:                     b.queue.Client,
		BatchSize:               1,
		MaxConcurrency:          1,
		FunctionTimeout:         10 * time.Second,
		PollWait:                time.Second,
		ReportBatchItemFailures: true,
		Env: append(localrun.AWSEnv(),
			EnvIdempotencyTable+"="+b.cfg.IdempotencyTable,
			EnvEffectsTable+"="+b.cfg.EffectsTable,
			EnvNamespace+"="+b.cfg.Namespace,
			EnvDLQURL+"="+b.cfg.DLQURL,
			EnvTracesExporter+"="+TracesConsole,
		),
		Output: &localrun.LineWriter{Line: out.line, Forward: log},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("stop runner: %v", err)
		}
		log.mu.Lock()
		log.done = true
		log.mu.Unlock()
	}
	t.Cleanup(stop)

	// Wait for progress: the record's span printed (it ends before the
	// invocation's, which ends before the response).
	record := func() (printedSpan, bool) {
		for _, s := range out.all() {
			if s.Name == "lambdaidem "+DefaultNamespace && s.attr("messaging.message.id") == sent.MessageID {
				return s, true
			}
		}
		return printedSpan{}, false
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, ok := record(); ok && b.queue.Count(t) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record span for message %s within 60s (runner %+v, %d spans printed)", sent.MessageID, r.Stats(), len(out.all()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()

	rec, _ := record()
	if rec.attr("lambdaidem.outcome") != "processed" || rec.attr("messaging.system") != "aws_sqs" {
		t.Errorf("record span attributes %+v", rec.Attributes)
	}
	want := send.SpanContext()
	linked := false
	for _, l := range rec.Links {
		linked = linked || (l.SpanContext.TraceID == want.TraceID().String() && l.SpanContext.SpanID == want.SpanID().String())
	}
	if !linked {
		t.Errorf("record span links %+v, want one to the producer's span %s/%s", rec.Links, want.TraceID(), want.SpanID())
	}
	var inv, effect bool
	for _, s := range out.all() {
		inv = inv || (s.Name == "process "+queueName(b.queue.ARN) && s.SpanContext.SpanID == rec.Parent.SpanID)
		effect = effect || (s.Name == "write effect" && s.Parent.SpanID == rec.SpanContext.SpanID)
	}
	if !inv || !effect {
		t.Errorf("invocation span parent of the record's: %t; the effect's write under the record's: %t", inv, effect)
	}
	if eff := b.effects(t); len(eff["t-1"]) != 1 {
		t.Errorf("order t-1: %d effect rows, want 1", len(eff["t-1"]))
	}
}

// queueName is the last field of a queue ARN.
func queueName(arn string) string {
	for i := len(arn) - 1; i >= 0; i-- {
		if arn[i] == ':' {
			return arn[i+1:]
		}
	}
	return arn
}
