package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// TestDecoratorRequestsPerMessage: the decorator on the real store, counted
// at the proxy: first delivery 1+1 round trips, duplicate 1, cached
// duplicate 0, handler failure 1+1. Connection set-up (HELLO) is not a
// store request and is not counted.
func TestDecoratorRequestsPerMessage(t *testing.T) {
	b := setup(t, 2)
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	handle := func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("downstream refused")
		}
		return nil
	}
	plain := lambdaidem.SQS(b.store, handle, lambdaidem.WithNamespace(b.ns), quiet)
	cached := lambdaidem.SQS(b.store, handle, lambdaidem.WithNamespace(b.ns), quiet, lambdaidem.WithCache(100, time.Minute))
	rec := func(id, body string) events.SQSEvent {
		return events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		}}}
	}
	steps := []struct {
		name string
		h    func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
		ev   events.SQSEvent
		want int
	}{
		{"first delivery", plain, rec("m1", "ok"), 2},
		{"duplicate", plain, rec("m1", "ok"), 1},
		{"duplicate that fills the cache", cached, rec("m1", "ok"), 1},
		{"cached duplicate", cached, rec("m1", "ok"), 0},
		{"handler failure", plain, rec("m2", "bad"), 2},
	}
	for _, s := range steps {
		b.proxy.ResetCounts()
		if _, err := s.h(t.Context(), s.ev); err != nil && s.ev.Records[0].Body != "bad" {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := b.proxy.Count("EVALSHA") + b.proxy.Count("EVAL") + b.proxy.Count("HGETALL"); got != s.want {
			t.Errorf("%s: %d round trips, want %d", s.name, got, s.want)
		}
	}
}
