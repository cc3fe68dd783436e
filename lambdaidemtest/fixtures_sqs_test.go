package lambdaidemtest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// A fixture's MD5s are the ones the SQS emulator computes for the same
// body and message attributes.
func TestFixtureChecksumsMatchSQS(t *testing.T) {
	client := testenv.SQS(t)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name("fixture-md5"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	const body = `{"order":"o-1"}`
	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
			"amount": {DataType: aws.String("Number"), StringValue: aws.String("12.5")},
			"sig":    {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 1,
		WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	got := out.Messages[0]
	m := lambdaidemtest.Message(body, lambdaidemtest.WithAttribute("tenant", "acme"),
		lambdaidemtest.WithNumberAttribute("amount", 12.5), lambdaidemtest.WithBinaryAttribute("sig", []byte{1, 2, 3}))
	if m.Md5OfBody != aws.ToString(got.MD5OfBody) || m.Md5OfMessageAttributes != aws.ToString(got.MD5OfMessageAttributes) {
		t.Errorf("fixture MD5s %s / %s, SQS %s / %s", m.Md5OfBody, m.Md5OfMessageAttributes, aws.ToString(got.MD5OfBody), aws.ToString(got.MD5OfMessageAttributes))
	}
}
