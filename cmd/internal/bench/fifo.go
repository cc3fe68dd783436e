package bench

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// PathFIFO is one message group of 10 records from a FIFO queue: the
// records must run in order, one after another, so its floor is the same
// 20 requests issued sequentially.
const PathFIFO = "FIFO group of 10"

// fifoEvent is a FIFO queue's batch of one message group: the decorator
// keeps a group's records in order and runs them one at a time.
func fifoEvent(ids []string) events.SQSEvent {
	ev := event(ids...)
	group := "g-" + newID()
	for i := range ev.Records {
		r := &ev.Records[i]
		r.EventSourceARN += ".fifo"
		r.Attributes["MessageGroupId"] = group
		r.Attributes["MessageDeduplicationId"] = r.MessageId
		r.Attributes["SequenceNumber"] = strconv.Itoa(1_000_000_000 + i)
	}
	return ev
}

// fifoVariants are the Go variants of PathFIFO: the decorator on a FIFO
// batch of one group, and its floor, each record's claim and complete one
// record after another.
func (b *dynamoBench) fifoVariants() []variant {
	return []variant{
		{VariantLambdaidem, func(ctx context.Context) (time.Duration, error) {
			return b.out.run(ctx, b.h, fifoEvent(freshIDs(batchSize)), lambdaidem.OutcomeProcessed)
		}},
		{VariantFloor, func(ctx context.Context) (time.Duration, error) {
			ids := freshIDs(batchSize)
			ictx, cancel := invocation(ctx)
			defer cancel()
			t0 := time.Now()
			for _, id := range ids {
				if err := b.flr.first(ictx, id); err != nil {
					return time.Since(t0), err
				}
			}
			return time.Since(t0), nil
		}},
	}
}
