package producer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/producer"
)

// partialAPI answers a batch with one entry refused and one not mentioned.
// The emulator never refuses single entries, so this canned answer is the
// only way to exercise the mapping of SQS's per-entry report; SQS's own
// behaviour is tested against the emulator elsewhere.
type partialAPI struct{ producer.API }

func (partialAPI) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return &sqs.SendMessageBatchOutput{
		Successful: []types.SendMessageBatchResultEntry{{Id: in.Entries[0].Id, MessageId: aws.String("m-0")}},
		Failed: []types.BatchResultErrorEntry{{
			Id: in.Entries[1].Id, Code: aws.String("InternalError"), Message: aws.String("try again"), SenderFault: false,
		}},
	}, nil
}

func TestSendBatchMapsPerEntryFailures(t *testing.T) {
	t.Parallel()
	p := producer.New(partialAPI{}, "https://sqs.us-east-1.example/1/orders")
	results, err := p.SendBatch(t.Context(), []producer.Message{{Key: "a"}, {Key: "b"}, {Key: "c"}})
	var be *producer.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed[0] != 1 || be.Failed[1] != 2 {
		t.Fatalf("error = %v, want messages 1 and 2 failed", err)
	}
	var ee *producer.EntryError
	if results[0].MessageID != "m-0" || !errors.As(results[1].Err, &ee) || ee.Code != "InternalError" || ee.SenderFault {
		t.Errorf("results = %+v", results)
	}
	if results[2].Err == nil {
		t.Error("an entry SQS did not report on counts as sent")
	}
}
