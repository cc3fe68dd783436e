package otelidem

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// emfCapture keeps the metric sets the emf hook emits.
type emfCapture struct {
	mu   sync.Mutex
	sets []emf.MetricSet
}

func (c *emfCapture) Emit(_ context.Context, s emf.MetricSet) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets = append(c.sets, s)
	return nil
}

// totals sums the emf sets by metric, and by metric and reason ("name
// reason"), counting each value's count (HandlerLatency: its values).
func (c *emfCapture) totals() map[string]float64 {
	out := map[string]float64{}
	for _, s := range c.sets {
		reason, tenant := "", ""
		for _, d := range s.Dimensions {
			switch d.Name {
			case emf.DimensionReason:
				reason = d.Value
			case emf.DimensionTenant:
				tenant = d.Value
			}
		}
		for _, m := range s.Metrics {
			v := 0.0
			for _, x := range m.Values {
				v += x
			}
			if m.Name == emf.MetricHandlerLatency {
				v = float64(len(m.Values))
			}
			switch {
			case tenant != "":
				out[m.Name+" tenant="+tenant] += v
			case reason != "":
				out[m.Name+" "+reason] += v
			default:
				out[m.Name] += v
			}
		}
	}
	return out
}

// otelTotals sums the reader's data points under emf's names.
func otelTotals(t *testing.T, rd *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	add := func(name string, set attribute.Set, v float64) {
		emfName, ok := emfNames[name]
		if !ok {
			t.Errorf("metric %s mirrors no emf metric", name)
			return
		}
		if tenant, ok := set.Value(AttrTenant); ok && tenantMetrics[emfName] {
			out[emfName+" tenant="+tenant.AsString()] += v
		}
		out[emfName] += v
		if reason, ok := set.Value(AttrReason); ok {
			out[emfName+" "+reason.AsString()] += v
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Count))
				}
			default:
				t.Errorf("metric %s has data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// tenantMetrics are the metrics emf.WithTenantDimension splits by tenant;
// the others are totals there, and sums over tenants here.
var tenantMetrics = map[string]bool{emf.MetricRecords: true, emf.MetricProcessed: true, emf.MetricDuplicatesSkipped: true,
	emf.MetricDeadLettered: true, emf.MetricHandlerErrors: true, emf.MetricFailed: true}

// The metrics through OpenTelemetry count what emf counts, metric by
// metric and reason by reason, over invocations with every kind of
// outcome.
func TestMetricsMirrorEMF(t *testing.T) {
	for _, tenants := range []bool{false, true} {
		capture := &emfCapture{}
		emfOpts := []emf.Option{emf.WithEmitter(capture), emf.WithAllMetrics()}
		opts := []Option{}
		rd := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
		opts = append(opts, WithMeterProvider(mp))
		if tenants {
			emfOpts = append(emfOpts, emf.WithTenantDimension())
			opts = append(opts, WithTenantAttribute())
		}
		store := memstore.New()
		var mu sync.Mutex
		runs := map[string]int{}
		handle := func(_ context.Context, m events.SQSMessage) error {
			mu.Lock()
			runs[m.MessageId]++
			mu.Unlock()
			switch m.Body {
			case `{"k":"fail"}`:
				return errors.New("no")
			case `{"k":"poison"}`:
				return lambdaidem.Poison(errors.New("never"))
			}
			return nil
		}
		h := lambdaidem.SQS(store, handle,
			lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			lambdaidem.WithNamespace("orders"), lambdaidem.WithKeyJSONField("k"),
			lambdaidem.WithDeadLetterSink(sinkFunc(func() (string, error) { return "dl", nil })),
			lambdaidem.WithCache(100, time.Hour),
			lambdaidem.WithInvocationHook(emf.Hook(emfOpts...)),
			lambdaidem.WithObserver(New(opts...)))
		msg := func(id, body, group string) events.SQSMessage {
			m := events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:eu-west-1:1:q.fifo",
				Attributes: map[string]string{"ApproximateReceiveCount": "1", "MessageGroupId": group}}
			return m
		}
		batches := [][]events.SQSMessage{
			{msg("1", `{"k":"a"}`, "g1"), msg("2", `{"k":"fail"}`, "g2"), msg("3", `{"k":"b"}`, "g2"), msg("4", `{"k":"poison"}`, "g3"), msg("5", `not json`, "g4")},
			{msg("6", `{"k":"a"}`, "g1"), msg("7", `{"k":"a","x":1}`, "g5")},
			{msg("6", `{"k":"a"}`, "g1"), msg("4", `{"k":"poison"}`, "g3")},
		}
		for _, b := range batches {
			_, _ = h(context.Background(), events.SQSEvent{Records: b})
		}
		want, got := capture.totals(), otelTotals(t, rd)
		for name, v := range want {
			if v != 0 && got[name] != v {
				t.Errorf("tenants %t: %s = %v through OpenTelemetry, %v in emf", tenants, name, got[name], v)
			}
		}
		for name, v := range got {
			if want[name] != v {
				t.Errorf("tenants %t: %s = %v through OpenTelemetry, %v in emf", tenants, name, v, want[name])
			}
		}
		if len(want) < 10 {
			t.Errorf("emf counted only %v: the batches do not exercise the metrics", keys(want))
		}
	}
}

// Every emf metric is mirrored.
func TestEveryEMFMetricIsMirrored(t *testing.T) {
	mirrored := map[string]bool{}
	for _, e := range emfNames {
		mirrored[e] = true
	}
	for _, name := range []string{emf.MetricRecords, emf.MetricHandlerRuns, emf.MetricProcessed, emf.MetricDuplicatesSkipped,
		emf.MetricConflicts, emf.MetricInProgressRejections, emf.MetricLeasesLost, emf.MetricCompletionsUnrecorded,
		emf.MetricDeadLettered, emf.MetricDeadLetterFailures, emf.MetricStoreErrors, emf.MetricStoreRequests, emf.MetricFailed,
		emf.MetricTakeovers, emf.MetricHandlerErrors, emf.MetricNotStarted, emf.MetricFIFOGroupSkipped, emf.MetricMissingKeys,
		emf.MetricVisibilityFailures, emf.MetricHandlerLatency} {
		if !mirrored[name] {
			t.Errorf("emf metric %s has no OpenTelemetry counterpart", name)
		}
	}
}

type sinkFunc func() (string, error)

func (f sinkFunc) Send(context.Context, lambdaidem.DeadLetter) (string, error) { return f() }

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
