package sqsqueue

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

func TestResolvedURLMatchesEmulator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, fifo := range []bool{false, true} {
		q := b.newQueue(t, "src", fifo, nil)
		calls := &countingGetter{c: b.client}
		r := newResolver(calls, "", nil, nil)
		for range 3 {
			got, err := r.queueURL(b.ctx, q.arn)
			if err != nil {
				t.Fatal(err)
			}
			if got != q.url {
				t.Errorf("resolved %q from %s, the emulator says %q", got, q.arn, q.url)
			}
		}
		if n := calls.n.Load(); n != 1 {
			t.Errorf("GetQueueUrl called %d times for one ARN, want once (cached)", n)
		}
		// A queue of another account (same name) is another queue.
		other := q.arn[:strings.LastIndex(q.arn[:strings.LastIndex(q.arn, ":")], ":")+1] + "999999999999:" + q.arn[strings.LastIndex(q.arn, ":")+1:]
		if u, err := r.queueURL(b.ctx, other); err == nil && u == q.url {
			t.Errorf("%s resolved to %s, the queue of another account", other, u)
		}
	}
}

// countingGetter counts GetQueueUrl calls.
type countingGetter struct {
	c *sqs.Client
	n atomic.Int32
}

func (g *countingGetter) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	g.n.Add(1)
	return g.c.GetQueueUrl(ctx, in, opts...)
}

func (g *countingGetter) Options() sqs.Options { return g.c.Options() }

func TestChangeVisibilityBringsMessageBack(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			src := b.newQueue(t, "src", fifo, nil)
			// Received with a long visibility: only our change can bring it
			// back during the test.
			msg := b.consume(t, src, "body", nil, "g")
			if ms := b.receiveWait(t, src.url, 300, 1); len(ms) != 0 {
				t.Fatalf("message visible before the change")
			}
			if err := NewVisibilityChanger(b.client).ChangeVisibility(b.ctx, msg, 0); err != nil {
				t.Fatalf("ChangeVisibility: %v", err)
			}
			ms := b.receiveSome(t, src.url, 300)
			if len(ms) != 1 || deref(ms[0].MessageId) != msg.MessageId {
				t.Fatalf("after ChangeVisibility(0) received %d messages, want %s back", len(ms), msg.MessageId)
			}
		})
	}
}

func TestChangeVisibilityHidesMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "body", nil, "")
	ch := NewVisibilityChanger(b.client)
	if err := ch.ChangeVisibility(b.ctx, msg, 0); err != nil {
		t.Fatal(err)
	}
	// Taken back by a new receive, then hidden for an hour with the new
	// handle: the queue must answer empty.
	ms := b.receiveSome(t, src.url, 0)
	if len(ms) != 1 {
		t.Fatalf("received %d messages, want 1", len(ms))
	}
	if err := ch.ChangeVisibility(b.ctx, toEvent(ms[0], src.arn), time.Hour); err != nil {
		t.Fatal(err)
	}
	if ms := b.receiveWait(t, src.url, 0, 1); len(ms) != 0 {
		t.Errorf("message visible after ChangeVisibility(1h)")
	}
}

func TestChangeVisibilityTotalLimit(t *testing.T) {
	testenv.SkipOn(t, testenv.FauxqsNoVisibilityTotalLimit)
	testenv.SkipOn(t, testenv.LocalStackNoVisibilityTotalLimit)
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "body", nil, "")
	// SQS counts the 12 hours from the message's start; once any time has
	// passed since then, asking for the full 12 hours again goes over. Wait
	// (on the same host clock) until at least a millisecond has passed.
	sent, err := strconv.ParseInt(msg.Attributes["SentTimestamp"], 10, 64)
	if err != nil {
		t.Fatalf("SentTimestamp %q: %v", msg.Attributes["SentTimestamp"], err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().UnixMilli() <= sent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	err = NewVisibilityChanger(b.client).ChangeVisibility(b.ctx, msg, 24*time.Hour)
	if !errors.Is(err, ErrVisibilityLimit) {
		t.Fatalf("err = %v, want ErrVisibilityLimit", err)
	}
}

func TestChangeVisibilityErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "body", nil, "")
	ch := NewVisibilityChanger(b.client)

	stale := msg
	stale.ReceiptHandle = "not-a-handle"
	if err := ch.ChangeVisibility(b.ctx, stale, 0); !errors.Is(err, ErrNotInFlight) {
		t.Errorf("invalid handle: err = %v, want ErrNotInFlight", err)
	}
	none := msg
	none.ReceiptHandle = ""
	if err := ch.ChangeVisibility(b.ctx, none, 0); !errors.Is(err, ErrNotInFlight) {
		t.Errorf("no handle: err = %v, want ErrNotInFlight", err)
	}
	bad := msg
	bad.EventSourceARN = "arn:aws:sns:us-east-1:123456789012:topic"
	if err := ch.ChangeVisibility(b.ctx, bad, 0); !errors.Is(err, ErrInvalidARN) {
		t.Errorf("bad ARN: err = %v, want ErrInvalidARN", err)
	}
	gone := msg
	gone.EventSourceARN = src.arn + "-gone"
	if err := ch.ChangeVisibility(b.ctx, gone, 0); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("missing queue: err = %v, want ErrQueueNotFound", err)
	}

	closed := closedEndpoint(t)
	client := sqs.New(b.client.Options(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(closed)
		o.RetryMaxAttempts = 1
	})
	if err := NewVisibilityChanger(client).ChangeVisibility(b.ctx, msg, 0); !errors.Is(err, ErrUnreachable) {
		t.Errorf("closed port: err = %v, want ErrUnreachable", err)
	}
}

func TestChangeVisibilityOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "body", nil, "")
	// The record names the queue in a region the emulator does not serve;
	// the override points at the real one.
	arn := strings.Split(src.arn, ":")
	arn[3] = "eu-west-9"
	msg.EventSourceARN = strings.Join(arn, ":")
	ch := NewVisibilityChanger(b.client, WithQueueURLs(map[string]string{msg.EventSourceARN: src.url}))
	if err := ch.ChangeVisibility(b.ctx, msg, 0); err != nil {
		t.Fatalf("ChangeVisibility with override: %v", err)
	}
	if ms := b.receiveSome(t, src.url, 300); len(ms) != 1 {
		t.Fatalf("received %d messages after the change, want 1", len(ms))
	}
}
