package producer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// countingAPI counts SendMessageBatch requests on their way to SQS.
type countingAPI struct {
	*sqs.Client
	batches atomic.Int32
}

func (c *countingAPI) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.batches.Add(1)
	return c.Client.SendMessageBatch(ctx, in, opts...)
}

// keyOverhead is what the key attribute adds to a message's size.
func keyOverhead(key string) int {
	return len(producer.DefaultKeyAttribute) + len("String") + len(key)
}

// 1 MiB messages: the largest one SQS takes is sent and round-trips, one
// byte more is refused by name before sending, a batch over 1 MiB in all is
// split into requests that fit, and the decorator hashes and deduplicates
// 1 MiB bodies.
func TestOneMebibyteMessages(t *testing.T) {
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, arn := newQueue(t, client, false)
	api := &countingAPI{Client: client}
	p := producer.New(api, url)

	largest := producer.Message{Key: "big", Body: strings.Repeat("a", producer.MaxRequestBytes-keyOverhead("big"))}
	if _, err := p.Send(t.Context(), largest); err != nil {
		t.Fatalf("Send of exactly %d bytes: %v", producer.MaxRequestBytes, err)
	}
	over := largest
	over.Body += "a"
	if _, err := p.Send(t.Context(), over); !errors.Is(err, producer.ErrTooLarge) {
		t.Fatalf("Send of one byte more: %v, want ErrTooLarge", err)
	}

	// Three of 600,000 bytes: no two fit in one request.
	var batch []producer.Message
	for _, k := range []string{"b1", "b2", "b3"} {
		batch = append(batch, producer.Message{Key: k, Body: strings.Repeat(k, 300_000)})
	}
	if _, err := p.SendBatch(t.Context(), batch); err != nil {
		t.Fatalf("SendBatch of 3 × 600 kB: %v", err)
	}
	if n := api.batches.Load(); n != 3 {
		t.Errorf("SendBatch made %d requests, want 3", n)
	}

	got := receiveN(t, client, rs, url, 4)
	want := map[string]string{"big": largest.Body}
	for _, m := range batch {
		want[m.Key] = m.Body
	}
	var runs atomic.Int32
	handle := lambdaidem.SQS(memstore.New(), func(ctx context.Context, msg events.SQSMessage) error {
		runs.Add(1)
		return nil
	}, lambdaidem.WithKeyAttribute(producer.DefaultKeyAttribute), lambdaidem.WithNamespace("large"))
	ev := events.SQSEvent{}
	for _, m := range got {
		if body := aws.ToString(m.Body); body != want[keyOf(m)] {
			t.Errorf("key %s came back with %d bytes, want %d", keyOf(m), len(body), len(want[keyOf(m)]))
		}
		ev.Records = append(ev.Records, toEvent(m, arn))
	}
	// Twice: the second time every record is a duplicate of a 1 MiB body.
	for range 2 {
		if resp, err := handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("handler = %+v, %v; want every record acknowledged", resp, err)
		}
	}
	if n := runs.Load(); n != 4 {
		t.Errorf("handler ran %d times for 4 keys delivered twice, want 4", n)
	}
	// The same key with a body differing in its last byte is a conflict.
	changed := ev.Records[0]
	changed.MessageId += "-changed"
	changed.Body = changed.Body[:len(changed.Body)-1] + "z"
	resp, err := handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{changed}})
	if err == nil && len(resp.BatchItemFailures) != 1 {
		t.Errorf("a 1 MiB body changed in its last byte was accepted: %+v", resp)
	}
}
