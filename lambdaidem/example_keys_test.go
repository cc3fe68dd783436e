package lambdaidem_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// The default key is SQS's message ID: a redelivery of the same message
// is a duplicate, but a producer's second send of the same order is a new
// message and runs again.
func ExampleWithKeyMessageID() {
	handler := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithKeyMessageID(), // the default
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			fmt.Println(r.Records[0].MessageID, r.Records[0].Outcome)
		}))
	ctx := context.Background()
	for _, id := range []string{"m-1", "m-1", "m-2"} {
		handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: `{"order":"o-1"}`}}})
	}
	// Output:
	// m-1 processed
	// m-1 duplicate
	// m-2 processed
}

// A dotted path reads the key from the JSON body. A body without the field
// has no key; a body that is not JSON is malformed. Neither ever runs: with
// a dead-letter sink both go to the dead-letter queue with their reason,
// without one they are reported failed and SQS keeps them.
func ExampleWithKeyJSONField() {
	handler := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithKeyJSONField("order.id"),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler)), // the example prints what it needs
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			for _, rec := range r.Records {
				fmt.Printf("%s key=%q %s\n", rec.MessageID, rec.Key, rec.Outcome)
			}
		}))
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"order":{"id":"o-7","cents":100}}`},
		{MessageId: "m-2", Body: `{"order":{"cents":100}}`},
		{MessageId: "m-3", Body: `{"order":{"id":"o-8"`},
	}})
	fmt.Println("failed:", resp.BatchItemFailures)
	// Output:
	// m-1 key="o-7" processed
	// m-2 key="" missing_key
	// m-3 key="" malformed_body
	// failed: [{m-2} {m-3}]
}

// A message attribute set by the producer is the key.
func ExampleWithKeyAttribute() {
	handler := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithKeyAttribute("idempotency-key"),
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			fmt.Println(r.Records[0].MessageID, r.Records[0].Key, r.Records[0].Outcome)
		}))
	key := "order-42"
	attrs := map[string]events.SQSMessageAttribute{"idempotency-key": {DataType: "String", StringValue: &key}}
	ctx := context.Background()
	handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", MessageAttributes: attrs}}})
	handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-2", MessageAttributes: attrs}}})
	// Output:
	// m-1 order-42 processed
	// m-2 order-42 duplicate
}

// On a FIFO queue the producer's deduplication ID is the key; SQS forgets
// it after five minutes, the record does not. With perGroup (a
// high-throughput FIFO queue, which deduplicates per message group) the
// group is part of the key.
func ExampleWithKeyDeduplicationID() {
	handler := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithKeyDeduplicationID(true),
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			for _, rec := range r.Records {
				fmt.Println(rec.MessageID, rec.Key, rec.Outcome)
			}
		}))
	msg := func(id, group, dedup string) events.SQSMessage {
		return events.SQSMessage{
			MessageId:      id,
			EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
			Attributes:     map[string]string{"MessageGroupId": group, "MessageDeduplicationId": dedup},
		}
	}
	handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("m-1", "customer-1", "d-1"),
		msg("m-2", "customer-2", "d-1"),
		msg("m-3", "customer-1", "d-1"),
	}})
	// Output:
	// m-1 customer-1/d-1 processed
	// m-2 customer-2/d-1 processed
	// m-3 customer-1/d-1 duplicate
}

// A key function can read a key from anywhere in the message. It returns
// an error wrapping ErrMissingKey when there is none, or ErrMalformedBody
// when the body cannot be parsed; each is dead-lettered with its reason.
func ExampleWithKeyFunc() {
	tenantOrder := func(m events.SQSMessage) (string, error) {
		tenant, order, ok := strings.Cut(m.Body, ":")
		switch {
		case !ok:
			return "", fmt.Errorf("%w: want TENANT:ORDER", lambdaidem.ErrMalformedBody)
		case order == "":
			return "", fmt.Errorf("%w: no order", lambdaidem.ErrMissingKey)
		}
		return tenant + "/" + order, nil
	}
	handler := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithKeyFunc(tenantOrder),
		lambdaidem.WithDeadLetterSink(printSink{}),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler)), // the example prints what it needs
		lambdaidem.WithConcurrency(1))
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: "acme:o-1"},
		{MessageId: "m-2", Body: "acme:"},
		{MessageId: "m-3", Body: "acme o-1"},
	}})
	fmt.Println("failed:", resp.BatchItemFailures)
	// Output:
	// dead-lettered m-2: missing_key
	// dead-lettered m-3: malformed_body
	// failed: []
}

// printSink is a dead-letter sink that prints what it is sent; in a
// function, sqsqueue.NewSink sends it to an SQS dead-letter queue.
type printSink struct{}

func (printSink) Send(_ context.Context, dl lambdaidem.DeadLetter) (string, error) {
	fmt.Printf("dead-lettered %s: %s\n", dl.Message.MessageId, dl.Reason)
	return "dlq-" + dl.Message.MessageId, nil
}
