package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Resends counts, for the sends of one SQS client, the messages a retried
// attempt may have sent again. SendMessage is not idempotent on a standard
// queue: when an attempt reaches the emulator and its answer is lost (a
// connection closed under load), the SDK's retry sends a second copy, as it
// would on SQS. A test that counts the messages of a standard queue allows
// exactly that many extra copies, and no more; a FIFO queue drops a
// retried send by its deduplication ID, so there every copy counts.
type Resends struct {
	mu    sync.Mutex
	extra int
}

// SQSWithResends is SQS(t, opts...) with its sends counted by the returned
// Resends.
func SQSWithResends(t testing.TB, opts ...func(*sqs.Options)) (*sqs.Client, *Resends) {
	t.Helper()
	r := &Resends{}
	return SQS(t, append([]func(*sqs.Options){r.option}, opts...)...), r
}

// Count returns how many messages the client's retried attempts may have
// sent a second time.
func (r *Resends) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.extra
}

// Allowed is how many extra copies a test may find on the queue at
// queueURL: Count on a standard queue, none on a FIFO queue, which drops a
// retried send by its deduplication ID.
func (r *Resends) Allowed(queueURL string) int {
	if strings.HasSuffix(queueURL, ".fifo") {
		return 0
	}
	return r.Count()
}

type copiesKey struct{}

// option counts each send call once before the retry loop (its messages,
// taken back) and each of its attempts after it (its messages, added): what
// remains is the messages of every attempt after a call's first.
func (r *Resends) option(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("lambdaidemCountSends",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				copies := 0
				switch p := in.Parameters.(type) {
				case *sqs.SendMessageInput:
					copies = 1
				case *sqs.SendMessageBatchInput:
					copies = len(p.Entries)
				}
				if copies > 0 {
					r.add(-copies)
					ctx = middleware.WithStackValue(ctx, copiesKey{}, copies)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		if err != nil {
			return err
		}
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("lambdaidemCountSendAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if copies, ok := middleware.GetStackValue(ctx, copiesKey{}).(int); ok {
					r.add(copies)
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

func (r *Resends) add(n int) {
	r.mu.Lock()
	r.extra += n
	r.mu.Unlock()
}
