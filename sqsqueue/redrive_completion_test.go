package sqsqueue

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// These tests hold redrive to its promise never to delete a copy whose
// payload did not run: a COMPLETED record is the copy's work only when it
// completed with the copy's payload. They run the real decorator, Sink and
// Redrive on every store.

// adminStore is what the tests need of a store: the decorator's calls and
// the operator's.
type adminStore interface {
	idemstore.Store
	idemstore.Admin
}

// completionStores builds each store of the module, each on its own table,
// key prefix or map.
var completionStores = map[string]func(t *testing.T) adminStore{
	"memory": func(*testing.T) adminStore { return memstore.New() },
	"dynamodb": func(t *testing.T) adminStore {
		client := testenv.DynamoDB(t)
		table := testenv.Name("sqsqueue-redrive")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		// TTL off: the tests' clock runs days behind DynamoDB Local's.
		if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		t.Cleanup(func() {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		return dynamo.NewAdmin(client, table)
	},
	"redis": func(t *testing.T) adminStore {
		client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { _ = client.Close() })
		// The slack keeps the server, on the real clock, from deleting
		// keys the tests' clock (days behind) still counts as live.
		return redisstore.New(client, "sqsqueue-"+rand.Text()[:10], redisstore.WithExpirySlack(365*24*time.Hour))
	},
}

// completionEnv is a source queue, a DLQ and a decorated function keyed by
// the idempotency-key attribute, on one store, with a clock the test
// moves.
type completionEnv struct {
	bundle
	t        *testing.T
	src, dlq queue
	store    adminStore
	clock    *testclock.Clock
	poison   bool
	ran      map[string]int // successful runs per body
	h        func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}

func newCompletionEnv(t *testing.T, store adminStore) *completionEnv {
	t.Helper()
	b := setup(t)
	e := &completionEnv{
		bundle: b, t: t, store: store, poison: true, ran: map[string]int{},
		// Far enough back that moving past a record's retention brings the
		// clock to today: the decorator must not find its invocation's
		// time (read from the real clock) long gone.
		clock: testclock.New(time.Now().UTC().Truncate(time.Second).Add(-lambdaidem.DefaultUnfinishedRetention - time.Hour)),
		src:   b.newQueue(t, "src", false, nil), dlq: b.newQueue(t, "dlq", false, nil),
	}
	e.h = lambdaidem.SQS(store, func(_ context.Context, m events.SQSMessage) error {
		if e.poison {
			return lambdaidem.Poison(errors.New("bad order"))
		}
		e.ran[m.Body]++
		return nil
	}, lambdaidem.WithNamespace("ns"), lambdaidem.WithKeyAttribute(keyAttr),
		lambdaidem.WithDeadLetterSink(NewSink(b.client, e.dlq.url)), lambdaidem.WithClock(e.clock))
	return e
}

// deliver sends body with key to the source queue and hands it to the
// function as Lambda would, deleting it once acknowledged.
func (e *completionEnv) deliver(body, key string) {
	e.t.Helper()
	m := e.consume(e.t, e.src, body, map[string]types.MessageAttributeValue{keyAttr: {DataType: ptr("String"), StringValue: ptr(key)}}, "")
	resp, err := e.h(e.ctx, events.SQSEvent{Records: []events.SQSMessage{m}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("the function did not acknowledge %q: %+v, %v", body, resp, err)
	}
	if _, err := e.client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.src.url, ReceiptHandle: &m.ReceiptHandle}); err != nil {
		e.t.Fatal(err)
	}
}

// redrive runs Redrive on the environment's clock; a run ends after one
// long poll that finds nothing new.
func (e *completionEnv) redrive(dry bool) []RedriveEvent {
	e.t.Helper()
	var evs []RedriveEvent
	_, err := Redrive(e.ctx, RedriveOptions{
		Client: e.client, DeadLetterQueueURL: e.dlq.url, SourceQueues: []string{e.src.arn},
		Resetter: e.store, Records: e.store, DryRun: dry, WaitTime: time.Second,
		Now:      e.clock.Now,
		Progress: func(ev RedriveEvent) { evs = append(evs, ev) },
	})
	if err != nil {
		e.t.Fatalf("Redrive: %v", err)
	}
	return evs
}

// copies is how many messages q holds, visible or not.
func (e *completionEnv) copies(q queue) int {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &q.url,
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, a := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, err := strconv.Atoi(out.Attributes[string(a)])
		if err != nil {
			e.t.Fatalf("%s of %s: %q", a, q.url, out.Attributes[string(a)])
		}
		n += v
	}
	return n
}

// TestRedriveKeepsCopyOfUnrunPayload: a poison message is dead-lettered,
// its record is forgotten or expires, and a message with the same key and
// another payload completes a new record. The first message's copy never
// ran: redrive (and its dry run) must leave it in the DLQ with the reason,
// not delete it as done.
func TestRedriveKeepsCopyOfUnrunPayload(t *testing.T) {
	t.Parallel()
	for name, newStore := range completionStores {
		for _, gone := range []string{"forgotten", "expired"} {
			t.Run(name+"/"+gone, func(t *testing.T) {
				t.Parallel()
				e := newCompletionEnv(t, newStore(t))
				e.deliver(`{"order":1,"amount":10}`, "order-1")
				if n := e.copies(e.dlq); n != 1 {
					t.Fatalf("DLQ holds %d copies after the poison message, want 1", n)
				}
				e.forgetOrExpire(gone, "order-1")
				e.poison = false
				e.deliver(`{"order":1,"amount":99}`, "order-1")

				for _, dry := range []bool{true, false} {
					evs := e.redrive(dry)
					ev := wantOne(t, evs, RedriveSkipped, ErrOtherCompletion)
					if ev.Record.Status != idemstore.StatusCompleted || ev.Metadata.PayloadHash == "" || ev.Metadata.PayloadHash == ev.Record.PayloadHash {
						t.Errorf("dry run %t: record %s with hash %q, copy's hash %q; want COMPLETED under another hash", dry, ev.Record.Status, ev.Record.PayloadHash, ev.Metadata.PayloadHash)
					}
					if !strings.Contains(ev.Err.Error(), "never ran") {
						t.Errorf("dry run %t: reason %q does not say the payload never ran", dry, ev.Err)
					}
				}
				if n := e.copies(e.dlq); n != 1 {
					t.Errorf("DLQ holds %d copies after the redrive, want the unrun one", n)
				}
				if n := e.copies(e.src); n != 0 {
					t.Errorf("the source queue holds %d messages: the copy was sent back", n)
				}
				if e.ran[`{"order":1,"amount":10}`] != 0 || e.ran[`{"order":1,"amount":99}`] != 1 {
					t.Errorf("runs per body: %v", e.ran)
				}
			})
		}
	}
}

// TestRedriveDeletesCopyOfCompletedPayload: the same, but the producer
// sent the same payload again and it completed: the copy's work is done,
// and redrive deletes it without sending it.
func TestRedriveDeletesCopyOfCompletedPayload(t *testing.T) {
	t.Parallel()
	for name, newStore := range completionStores {
		for _, gone := range []string{"forgotten", "expired"} {
			t.Run(name+"/"+gone, func(t *testing.T) {
				t.Parallel()
				e := newCompletionEnv(t, newStore(t))
				body := `{"order":2,"amount":10}`
				e.deliver(body, "order-2")
				e.forgetOrExpire(gone, "order-2")
				e.poison = false
				e.deliver(body, "order-2")

				wantOne(t, e.redrive(true), RedriveWouldDeleteDone, nil)
				if n := e.copies(e.dlq); n != 1 {
					t.Fatalf("the dry run changed the DLQ: %d copies", n)
				}
				ev := wantOne(t, e.redrive(false), RedriveAlreadyDone, nil)
				if ev.Metadata.PayloadHash != ev.Record.PayloadHash {
					t.Errorf("deleted as done under hash %q, the copy's is %q", ev.Record.PayloadHash, ev.Metadata.PayloadHash)
				}
				if n := e.copies(e.dlq); n != 0 {
					t.Errorf("DLQ holds %d copies, want 0", n)
				}
				if n := e.copies(e.src); n != 0 || e.ran[body] != 1 {
					t.Errorf("source holds %d messages, the payload ran %d times; want 0 and 1", n, e.ran[body])
				}
			})
		}
	}
}

// forgetOrExpire removes the dead-lettered record of key: an operator's
// forget (abandoning the copy, which the CLI warns about), or the clock
// moving past the record's retention.
func (e *completionEnv) forgetOrExpire(how, key string) {
	e.t.Helper()
	switch how {
	case "forgotten":
		req := idemstore.ForgetRequest{Namespace: "ns", Key: key, Now: e.clock.Now(), Grace: idemstore.DefaultGrace}
		if _, err := e.store.Forget(e.ctx, req); !errors.Is(err, idemstore.ErrWouldAbandonCopy) {
			e.t.Fatalf("Forget of a DEAD_LETTERED record without AbandonCopy = %v, want ErrWouldAbandonCopy", err)
		}
		req.AbandonCopy = true
		if _, err := e.store.Forget(e.ctx, req); err != nil {
			e.t.Fatal(err)
		}
	case "expired":
		e.clock.Advance(lambdaidem.DefaultUnfinishedRetention + time.Hour)
	}
	if _, err := e.store.Get(e.ctx, idemstore.GetRequest{Namespace: "ns", Key: key, Now: e.clock.Now()}); !errors.Is(err, idemstore.ErrNotFound) {
		e.t.Fatalf("the record of %s is still there (%v)", key, err)
	}
}

// TestRedriveKeepsOtherPayloadOfDeadLetteredKey: the same gap within one
// record. A second message with the key of a DEAD_LETTERED record, and
// another payload, is dead-lettered as key_already_dead_lettered. Once the
// first copy was redriven and completed, the second copy's payload still
// never ran: it stays in the DLQ.
func TestRedriveKeepsOtherPayloadOfDeadLetteredKey(t *testing.T) {
	t.Parallel()
	for name, newStore := range completionStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newCompletionEnv(t, newStore(t))
			first, other := `{"order":3,"amount":10}`, `{"order":3,"amount":12}`
			e.deliver(first, "order-3")
			e.deliver(other, "order-3")
			if n := e.copies(e.dlq); n != 2 {
				t.Fatalf("DLQ holds %d copies, want 2", n)
			}
			e.poison = false
			if evs := e.redrive(false); len(evs) != 2 {
				t.Fatalf("first run handled %d copies, want 2: %+v", len(evs), evs)
			}
			// The copy sent back runs and completes the key.
			for polls := 0; e.ran[first] == 0; polls++ {
				if polls == 30 {
					t.Fatal("the redriven message never reached the source queue")
				}
				out, err := e.client.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{
					QueueUrl: &e.src.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range out.Messages {
					if _, err := e.h(e.ctx, events.SQSEvent{Records: []events.SQSMessage{toEvent(m, e.src.arn)}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ev := wantOne(t, e.redrive(false), RedriveSkipped, ErrOtherCompletion)
			if ev.Metadata.Reason != idemstore.ReasonKeyDeadLettered {
				t.Errorf("the copy left is the %s one, want %s", ev.Metadata.Reason, idemstore.ReasonKeyDeadLettered)
			}
			if e.ran[other] != 0 || e.copies(e.dlq) != 1 {
				t.Errorf("the other payload ran %d times, the DLQ holds %d; want 0 and 1", e.ran[other], e.copies(e.dlq))
			}
		})
	}
}
