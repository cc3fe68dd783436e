package integration_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// fencedCondition is the rule a downstream row follows, written once per
// key by whoever holds the lease:
//
//   - no row yet: accept;
//   - a row from another generation: accept. A generation starts only
//     when the key's record is gone — its retention ran out (hours to days,
//     while a lease lasts at most 15 minutes, so no owner of the old
//     generation still runs) or an operator forgot or redrove the key.
//     Generations are random, not ordered, so they cannot be compared; the
//     newest writer wins. The one gap: forgetting a key while its handler
//     still runs (operators must not; `lambdaidem list --stuck` shows such
//     keys, and a release waits for the lease to end);
//   - a row from this generation: accept only a claim at least as high.
//     Claims rise with every claim of the key, so a lower claim is an
//     owner whose lease was taken over. An equal claim is the same owner
//     again — a second write in one run, or the SDK retrying a write
//     whose answer was lost — and is accepted, so the owner does not fail
//     its own work.
const fencedCondition = "attribute_not_exists(pk) OR fence_gen <> :gen OR fence_claim <= :claim"

// fencedPut writes key's downstream row under the lease's fencing number.
func fencedPut(ctx context.Context, db *dynamodb.Client, table, key string, f idemstore.Fence, value string) error {
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]dbtypes.AttributeValue{
			"pk":          &dbtypes.AttributeValueMemberS{Value: key},
			"fence_gen":   &dbtypes.AttributeValueMemberS{Value: f.Generation},
			"fence_claim": &dbtypes.AttributeValueMemberN{Value: strconv.FormatInt(f.Claim, 10)},
			"value":       &dbtypes.AttributeValueMemberS{Value: value},
		},
		ConditionExpression: aws.String(fencedCondition),
		ExpressionAttributeValues: map[string]dbtypes.AttributeValue{
			":gen":   &dbtypes.AttributeValueMemberS{Value: f.Generation},
			":claim": &dbtypes.AttributeValueMemberN{Value: strconv.FormatInt(f.Claim, 10)},
		},
	})
	return err
}

// TestFencingNumberInTheHandlersOwnWrites: a handler writes a downstream
// DynamoDB table conditioned on its lease's fencing number. After a
// takeover, the stale owner's late write is refused by DynamoDB; the new
// owner may write twice; a fresh generation (the key's retention ran out)
// writes over the old one.
func TestFencingNumberInTheHandlersOwnWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ledger := e.keyedTable(t, "lambdaidem-it-ledger")
	opts := e.opts(lambdaidem.WithRetention(time.Hour))
	write := func(ctx context.Context, key, value string) error {
		l, ok := lambdaidem.LeaseFromContext(ctx)
		if !ok {
			return errors.New("no lease in the handler's context")
		}
		return fencedPut(ctx, e.db, ledger, key, l.Fence, value)
	}
	row := func() map[string]dbtypes.AttributeValue {
		out, err := e.db.GetItem(t.Context(), &dynamodb.GetItemInput{
			TableName:      aws.String(ledger),
			Key:            map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: "acct-1"}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}

	entered, release := make(chan struct{}), make(chan struct{})
	var staleErr error
	stale := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release // paused past its lease
		// Its context ended with the lease (by the test's clock); a write
		// already on its way, or one that ignores the context, still
		// reaches DynamoDB, and the fencing number is what refuses it.
		staleErr = write(context.WithoutCancel(ctx), m.Body, "stale")
		return staleErr
	}, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stale(context.Background(), batch(message("m1", "acct-1", 1)))
	}()
	<-entered

	e.clock.Advance(2 * time.Minute)
	fresh := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
		if err := write(ctx, m.Body, "fresh, first write"); err != nil {
			return err
		}
		return write(ctx, m.Body, "fresh") // the same owner again: accepted
	}, opts...)
	if resp, err := fresh(context.Background(), batch(message("m1", "acct-1", 2))); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("takeover: failures %v, error %v", resp.BatchItemFailures, err)
	}
	close(release)
	<-done

	var ccf *dbtypes.ConditionalCheckFailedException
	if !errors.As(staleErr, &ccf) {
		t.Fatalf("the stale owner's late write: %v, want DynamoDB's ConditionalCheckFailedException", staleErr)
	}
	it := row()
	gen := str(it, "fence_gen")
	if str(it, "value") != "fresh" || num(t, it, "fence_claim") != 2 {
		t.Fatalf("ledger row %v, want the new owner's (claim 2)", it)
	}
	if r := e.record(t, "acct-1"); r.Status != lambdaidem.StatusCompleted || r.Fence.Generation != gen {
		t.Fatalf("record %s with fence %+v, ledger generation %s", r.Status, r.Fence, gen)
	}

	// An hour later the key is forgotten; the same key starts a new
	// generation at claim 1, which the downstream row accepts.
	e.clock.Advance(2 * time.Hour)
	reborn := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
		return write(ctx, m.Body, "reborn")
	}, opts...)
	if resp, err := reborn(context.Background(), batch(message("m2", "acct-1", 1))); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("new generation: failures %v, error %v", resp.BatchItemFailures, err)
	}
	it = row()
	if str(it, "value") != "reborn" || num(t, it, "fence_claim") != 1 || str(it, "fence_gen") == gen {
		t.Fatalf("ledger row %v, want claim 1 of a new generation", it)
	}
}
