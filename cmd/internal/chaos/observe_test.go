package chaos

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// A key's trail follows its message through receive, the library's log
// line and the invocation's delete, so a lost key can be traced.
func TestTrailFollowsAMessage(t *testing.T) {
	obs := harness.NewObserver()
	o := newObserver(obs)
	obs.Receive([]types.Message{{
		MessageId: aws.String("m-1"), Body: aws.String(`{"key":"k-7"}`),
		Attributes: map[string]string{"ApproximateReceiveCount": "2"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			producer.DefaultKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String("k-7")},
		},
	}})
	w := obs.Output(nil)
	if _, err := w.Write([]byte(`{"message":"lambdaidem: record in_progress","key":"k-7","message_id":"m-1","attempt":1,"outcome":"in_progress","requestId":"r-1"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	obs.Invoke(localrun.Invocation{RequestID: "r-1", Outcome: localrun.OutcomeSuccess, MessageIDs: []string{"m-1"}})
	got := strings.Join(o.trail["k-7"], "\n")
	for _, want := range []string{"received m-1 receive#2", "request r-1: in_progress message m-1", "invocation r-1 ended", "m-1 deleted=false"} {
		if !strings.Contains(got, want) {
			t.Errorf("trail lacks %q:\n%s", want, got)
		}
	}
}
