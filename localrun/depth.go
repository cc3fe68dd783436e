package localrun

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// QueueDepth returns how many messages a queue holds: visible, in flight
// and delayed. A driver waits for it to reach zero (with nothing in flight
// in the runner) to know the queue is drained.
func QueueDepth(ctx context.Context, client SQSAPI, queueURL string) (int, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("localrun: queue attributes of %s: %w", queueURL, err)
	}
	total := 0
	for name, v := range out.Attributes {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("localrun: queue attribute %s=%q is not a number", name, v)
		}
		total += n
	}
	return total, nil
}
