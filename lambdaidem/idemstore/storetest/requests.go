package storetest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// RequestsPerMessage runs the SQS decorator on store and checks the round
// trips each path costs, as requests reports them (the store's requests
// counted at a proxy, say): first delivery 2, duplicate 1, a duplicate that
// fills the cache 1, a cached duplicate 0, a handler failure 2. reset is
// called before each path so that requests counts that path alone.
func RequestsPerMessage(t *testing.T, store idemstore.Store, namespace string, reset func(), requests func() int) {
	t.Helper()
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	handle := func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("downstream refused")
		}
		return nil
	}
	plain := lambdaidem.SQS(store, handle, lambdaidem.WithNamespace(namespace), quiet)
	cached := lambdaidem.SQS(store, handle, lambdaidem.WithNamespace(namespace), quiet, lambdaidem.WithCache(100, time.Minute))
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
		reset()
		if _, err := s.h(t.Context(), s.ev); err != nil && s.ev.Records[0].Body != "bad" {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := requests(); got != s.want {
			t.Errorf("%s: %d store requests, want %d", s.name, got, s.want)
		}
	}
}
