package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// entry is one way into the library: the SQS handler, Wrap, httpidem.
type entry struct {
	name        string
	constructor string
	// build builds a handler running h on store, keyed by the call's key,
	// with opts and the entry's own; it panics as the constructor does.
	build func(t *testing.T, store idemstore.Store, ns string, h work, opts ...lambdaidem.Option) invoke
}

// work is what a feature's handler does: the user's function, given the
// call's key and payload.
type work func(ctx context.Context, key, payload string) (string, error)

// invoke makes one call (one SQS message, one Wrap call, one request).
type invoke func(ctx context.Context, key, payload string) call

// verdict is a call's outcome, in the same words for every entry point.
type verdict string

const (
	fresh      verdict = "ok"          // the function ran and its outcome was recorded
	replay     verdict = "replay"      // a duplicate: the recorded outcome, the function not run
	cached     verdict = "cached"      // a duplicate answered by the local cache (SQS)
	conflict   verdict = "conflict"    // the key was used with another payload
	late       verdict = "late-replay" // the result expired while the key is remembered
	settled    verdict = "dead-letter" // the key was dead-lettered (at-most-once, poison)
	inProgress verdict = "in-progress" // another holder has the key
	failed     verdict = "failed"      // the call failed; the key may be retried
)

type call struct {
	ran    bool // the function ran during this call
	v      verdict
	result string // Wrap and httpidem: the answer
	detail string // for failure messages
}

var quiet = lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// body is the SQS message body and the Wrap input.
type body struct {
	Key     string `json:"key"`
	Payload string `json:"payload"`
}

// counted runs h and records that it ran.
func counted(h work, ran *atomic.Bool) work {
	return func(ctx context.Context, key, payload string) (string, error) {
		ran.Store(true)
		return h(ctx, key, payload)
	}
}

const sourceARN = "arn:aws:sqs:us-east-1:123456789012:compat"

// deadLetters is the SQS cells' dead-letter sink.
type deadLetters struct {
	mu   sync.Mutex
	sent []lambdaidem.DeadLetter
	n    int
}

func (d *deadLetters) Send(_ context.Context, dl lambdaidem.DeadLetter) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	d.sent = append(d.sent, dl)
	return fmt.Sprintf("dlq-%d", d.n), nil
}

// last returns the ID of the latest copy sent.
func (d *deadLetters) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("dlq-%d", d.n)
}

var entries = []entry{
	{name: "SQS", constructor: "lambdaidem.SQS", build: buildSQS},
	{name: "Wrap", constructor: "lambdaidem.Wrap", build: buildWrap},
	{name: "httpidem", constructor: "httpidem.HTTP, httpidem.REST", build: buildHTTP},
}

func buildSQS(t *testing.T, store idemstore.Store, ns string, h work, opts ...lambdaidem.Option) invoke {
	var ran atomic.Bool
	var rep *lambdaidem.InvocationReport
	h = counted(h, &ran)
	opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(ns), lambdaidem.WithKeyJSONField("key"), quiet,
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rep = r })}, opts...)
	handler := lambdaidem.SQS(store, func(ctx context.Context, m events.SQSMessage) error {
		var b body
		if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
			return lambdaidem.Poison(err)
		}
		_, err := h(ctx, b.Key, b.Payload)
		return err
	}, opts...)
	n := 0
	return func(ctx context.Context, key, payload string) call {
		ran.Store(false)
		n++
		b, _ := json.Marshal(body{Key: key, Payload: payload})
		_, _ = handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: fmt.Sprintf("%s-%d", key, n), Body: string(b), EventSourceARN: sourceARN,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		}}})
		r := rep.Records[0]
		c := call{ran: ran.Load(), detail: fmt.Sprintf("outcome %s (%v)", r.Outcome, r.Err)}
		switch r.Outcome {
		case lambdaidem.OutcomeProcessed:
			c.v = fresh
		case lambdaidem.OutcomeDuplicate:
			c.v = replay
		case lambdaidem.OutcomeCachedDuplicate:
			c.v = cached
		case lambdaidem.OutcomeConflict:
			c.v = conflict
		case lambdaidem.OutcomeLateReplay:
			c.v = late
		case lambdaidem.OutcomeDeadLettered, lambdaidem.OutcomeDeadLetteredDuplicate:
			c.v = settled
		case lambdaidem.OutcomeInProgress:
			c.v = inProgress
		default:
			c.v = failed
		}
		return c
	}
}

func buildWrap(t *testing.T, store idemstore.Store, ns string, h work, opts ...lambdaidem.Option) invoke {
	var ran atomic.Bool
	h = counted(h, &ran)
	opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(ns), lambdaidem.WithKeyJSONField("key"), quiet}, opts...)
	f := lambdaidem.Wrap(store, func(ctx context.Context, in body) (string, error) { return h(ctx, in.Key, in.Payload) }, opts...)
	return func(ctx context.Context, key, payload string) call {
		ran.Store(false)
		out, err := f(ctx, body{Key: key, Payload: payload})
		c := call{ran: ran.Load(), result: out, detail: fmt.Sprintf("result %.40q, error %v", out, err)}
		var ip *lambdaidem.InProgressError
		switch {
		case err == nil && c.ran:
			c.v = fresh
		case err == nil:
			c.v = replay
		case errors.Is(err, lambdaidem.ErrKeyConflict):
			c.v = conflict
		case errors.Is(err, lambdaidem.ErrLateReplay):
			c.v = late
		case errors.Is(err, lambdaidem.ErrDeadLettered):
			c.v = settled
		case errors.As(err, &ip):
			c.v = inProgress
		default:
			c.v = failed
		}
		return c
	}
}

func buildHTTP(t *testing.T, store idemstore.Store, ns string, h work, opts ...lambdaidem.Option) invoke {
	var ran atomic.Bool
	h = counted(h, &ran)
	opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(ns), quiet}, opts...)
	handler := httpidem.HTTP(store, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		key, err := httpidem.ParseKey(r.Headers["idempotency-key"], httpidem.DefaultMaxKeyLength)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		out, err := h(ctx, key, r.Body)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: out}, nil
	}, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(opts...))
	return func(ctx context.Context, key, payload string) call {
		ran.Store(false)
		req := events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /compat", RawPath: "/compat", Body: payload,
			Headers:        map[string]string{"idempotency-key": `"` + key + `"`},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/compat"}},
		}
		resp, err := handler(ctx, req)
		var problem struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal([]byte(resp.Body), &problem)
		c := call{ran: ran.Load(), result: resp.Body, detail: fmt.Sprintf("status %d, code %q, error %v", resp.StatusCode, problem.Code, err)}
		switch {
		case err != nil:
			c.v = failed
		case resp.StatusCode == http.StatusCreated && resp.Headers[httpidem.HeaderReplayed] == "true":
			c.v = replay
		case resp.StatusCode == http.StatusCreated:
			c.v = fresh
		case problem.Code == "idempotency-key-reused":
			c.v = conflict
		case problem.Code == "idempotency-key-expired":
			c.v = late
		case problem.Code == "idempotency-key-outcome-unknown":
			c.v = settled
		case problem.Code == "idempotency-key-in-use":
			c.v = inProgress
		default:
			c.v = failed
		}
		return c
	}
}
