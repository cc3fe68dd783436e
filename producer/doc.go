// Package producer sends SQS messages with a stable idempotency key, so a
// producer that retries after a timeout, or a scheduler that fires twice,
// causes one effect downstream.
//
// Every message carries its key in the String message attribute
// DefaultKeyAttribute ("idempotency-key"), which a consumer decorated by
// lambdaidem reads with lambdaidem.WithKeyAttribute(producer.DefaultKeyAttribute):
// two messages with one key and the same body run the handler once,
// whether they are redeliveries or separate sends. On a FIFO queue (a URL
// ending in ".fifo") the message also gets a MessageDeduplicationId
// derived from the key ([DeduplicationID]) and needs a MessageGroupId, so
// SQS itself drops a copy sent within its five-minute deduplication
// window; the consumer's key catches the copies SQS lets through (standard
// queues, later retries).
//
// The smallest use:
//
//	p := producer.New(sqs.NewFromConfig(cfg), queueURL)
//	_, err := p.Send(ctx, producer.Message{Key: "order-42", Body: body})
//
// and on the consuming side:
//
//	lambda.Start(lambdaidem.SQS(store, handle,
//		lambdaidem.WithKeyAttribute(producer.DefaultKeyAttribute)))
//
// The key must name the business operation (an order ID, a scheduled
// run's ID), never be generated per send: a fresh key per retry defeats
// the point. A key reused with a different body is a conflict to the
// consumer, not a duplicate.
//
// [Producer.SendBatch] sends up to ten messages in one request and
// reports each message's outcome; retry exactly the failed ones, with the
// same keys.
package producer
