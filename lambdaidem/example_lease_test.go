package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// The handler can read its lease: the attempt (1 on first delivery) and
// the fencing number, which rises with every claim of the key. Passed to
// a downstream system that keeps the highest fence it has seen per key,
// it lets that system refuse a late write from a holder whose lease was
// taken over.
func ExampleLeaseFromContext() {
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		lease, _ := lambdaidem.LeaseFromContext(ctx)
		fmt.Println("attempt", lease.Attempt, "fence", lease.Fence.Claim)
		if lease.Attempt == 1 {
			return errors.New("downstream timeout")
		}
		return nil
	}
	handler := lambdaidem.SQS(memstore.New(), handle,
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler))) // the example prints what it needs
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: "charge o-1"}}}
	handler(context.Background(), ev) // fails: SQS delivers the message again
	handler(context.Background(), ev)
	// Output:
	// attempt 1 fence 1
	// attempt 2 fence 2
}
