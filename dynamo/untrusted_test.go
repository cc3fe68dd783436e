package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// A string that is not valid UTF-8 cannot be stored faithfully: the SDK's
// encoder turns the bad bytes into U+FFFD (two such keys would share one
// item) and DynamoDB refuses them. The store refuses them in keys and
// caller strings with a named error before any request, and records an
// error text holding such bytes (it may quote a body) with them replaced,
// so a failure is always recorded.
func TestInvalidUTF8NeverReachesDynamoDB(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	for _, mutate := range []func(*idemstore.ClaimRequest){
		func(r *idemstore.ClaimRequest) { r.Key = "k\xff" },
		func(r *idemstore.ClaimRequest) { r.Namespace = "n\xfe" },
		func(r *idemstore.ClaimRequest) { r.PayloadHash = "h\xff" },
		func(r *idemstore.ClaimRequest) { r.MessageID = "m\xff" },
	} {
		req := b.claimReq("k", 0)
		mutate(&req)
		if _, err := b.store.Claim(t.Context(), req); !errors.Is(err, dynamo.ErrInvalidKey) {
			t.Errorf("Claim(%q, %q, %q, %q) = %v, want ErrInvalidKey", req.Namespace, req.Key, req.PayloadHash, req.MessageID, err)
		}
	}
	if n := b.proxy.Total(); n != 0 {
		t.Errorf("%d requests sent for invalid input, want 0", n)
	}

	// Through the decorator: keys that are not valid UTF-8 are stored
	// hashed (two of them, two records), and a handler error quoting the
	// body is recorded.
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	runs := map[string]int{}
	h := lambdaidem.SQS(b.store, func(_ context.Context, m events.SQSMessage) error {
		runs[m.MessageId]++
		return errors.New("refused body " + m.Body)
	}, lambdaidem.WithNamespace(b.ns), quiet, lambdaidem.WithConcurrency(1),
		lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }))
	ev := events.SQSEvent{}
	for i, body := range []string{"\xff", "\xfe"} {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	resp, _ := h(t.Context(), ev)
	if len(resp.BatchItemFailures) != 2 || len(runs) != 2 {
		t.Fatalf("failures %v, runs %v: want both run and failed", resp.BatchItemFailures, runs)
	}
	for _, k := range []string{"\xff", "\xfe"} {
		r := b.get(t, idemstore.StoredKey(k), 0)
		if r.Status != idemstore.StatusFailed || !strings.HasPrefix(r.LastError, "refused body \ufffd") {
			t.Errorf("record of %q: %s, last error %q; want FAILED with the error recorded", k, r.Status, r.LastError)
		}
	}
}
