package integration_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// addEffect is a handler that adds one effect row to the completion and
// returns, counting its runs.
func (e *env) addEffect(t *testing.T, by string, runs *counter) lambdaidem.MessageHandler {
	return func(ctx context.Context, m events.SQSMessage) error {
		runs.inc()
		return lambdaidem.AddCompletionWrite(ctx, e.effectWrite(t, m.Body, by))
	}
}

// wantEffectWithCompletion checks the invariant of transactional
// completion at a moment between deliveries: an effect row exists exactly
// when the record is COMPLETED, and never more than one.
func (e *env) wantEffectWithCompletion(t *testing.T, key string) {
	t.Helper()
	rows := e.effectsOf(t, key)
	r := e.record(t, key)
	done := r.Status == lambdaidem.StatusCompleted
	if len(rows) > 1 || (len(rows) == 1) != done {
		t.Fatalf("key %s: %d effect rows %v with the record %s: the effect and its completion came apart", key, len(rows), rows, r.Status)
	}
}

// TestTransactionalCrashBetweenEffectAndCompletion: a process that dies
// after its handler made the effect and before the completion is recorded
// never leaves the effect without its completion, and the redelivery runs
// once and leaves exactly one effect row.
//
// How the crash is simulated, per point of death:
//
//   - "after the handler": the handler adds its effect with
//     AddCompletionWrite and then blocks, as a process that died (or froze)
//     there would never go on. With transactional completion, nothing has
//     been written at that moment; that is the point. The redelivery comes
//     after the lease ran out (fake clock), takes the lease over and writes
//     the one effect. The frozen process is then let go, as a paused
//     process may wake up: its completion, effect included, is refused.
//   - "transaction applied, answer lost": the store's client goes through a
//     fault proxy that forwards every TransactWriteItems to DynamoDB Local
//     and drops the answer, as if the process died the moment DynamoDB
//     committed. Effect and completion are both there; the redelivery is a
//     duplicate and does not run.
//   - "transaction refused": the proxy answers every TransactWriteItems with
//     a server error, so DynamoDB never sees it, as if the process died
//     before its request left. Neither is there; the redelivery runs once.
func TestTransactionalCrashBetweenEffectAndCompletion(t *testing.T) {
	t.Parallel()

	t.Run("after the handler", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		var rep reports
		prepared, wake := make(chan struct{}), make(chan struct{})
		var zombieRuns, runs counter
		zombie := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
			zombieRuns.inc()
			if err := lambdaidem.AddCompletionWrite(ctx, e.effectWrite(t, m.Body, "zombie")); err != nil {
				return err
			}
			close(prepared)
			<-wake // the process is gone from here on, until the test wakes it
			return nil
		}, e.opts(rep.hook())...)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = zombie(context.Background(), batch(message("m1", "k1", 1)))
		}()
		<-prepared
		e.wantEffectWithCompletion(t, "k1")
		if got := e.effectsOf(t, "k1"); len(got) != 0 {
			t.Fatalf("effect rows %v before any completion", got)
		}

		// SQS delivers the message again once its visibility timeout ends;
		// the lease has run out by then.
		e.clock.Advance(2 * time.Minute)
		h := lambdaidem.SQS(e.store, e.addEffect(t, "redelivery", &runs), e.opts(rep.hook())...)
		resp, err := h(context.Background(), batch(message("m1", "k1", 2)))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("redelivery: failures %v, error %v", resp.BatchItemFailures, err)
		}
		e.wantEffectWithCompletion(t, "k1")
		if got := e.effectsOf(t, "k1"); !slices.Equal(got, []string{"redelivery"}) {
			t.Fatalf("effect rows %v, want the redelivery's one", got)
		}

		close(wake)
		<-done
		if got := e.effectsOf(t, "k1"); !slices.Equal(got, []string{"redelivery"}) {
			t.Fatalf("effect rows %v after the frozen process woke up, want the redelivery's one", got)
		}
		outs := outcomes(rep.all())
		if !slices.Equal(outs, []lambdaidem.Outcome{lambdaidem.OutcomeProcessed, lambdaidem.OutcomeLeaseLost}) {
			t.Errorf("outcomes %v, want the redelivery processed, then the woken owner's lease lost", outs)
		}
		if r := e.record(t, "k1"); r.Status != lambdaidem.StatusCompleted || r.Attempts != 2 || r.Takeovers != 1 {
			t.Errorf("record %s, attempts %d, takeovers %d; want COMPLETED by the takeover", r.Status, r.Attempts, r.Takeovers)
		}
		if zombieRuns.get() != 1 || runs.get() != 1 {
			t.Errorf("handler runs: %d frozen, %d redelivery; want 1 each", zombieRuns.get(), runs.get())
		}
	})

	t.Run("transaction applied, answer lost", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		store, proxy := e.proxied(t)
		var runs counter
		proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("TransactWriteItems"), Action: faultproxy.DropResponse})
		h := lambdaidem.SQS(store, e.addEffect(t, "first", &runs), e.opts()...)
		_, _ = h(context.Background(), batch(message("m1", "k1", 1)))
		if proxy.Applied(faultproxy.DropResponse) == 0 {
			t.Fatal("no transaction went through the proxy")
		}
		e.wantEffectWithCompletion(t, "k1")

		proxy.ClearFaults()
		e.clock.Advance(2 * time.Minute)
		resp, err := h(context.Background(), batch(message("m1", "k1", 2)))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("redelivery: failures %v, error %v", resp.BatchItemFailures, err)
		}
		e.wantEffectWithCompletion(t, "k1")
		if got := e.effectsOf(t, "k1"); !slices.Equal(got, []string{"first"}) || runs.get() != 1 {
			t.Fatalf("effect rows %v after %d runs, want the first run's one", got, runs.get())
		}
	})

	t.Run("transaction refused", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		store, proxy := e.proxied(t)
		var runs counter
		proxy.Inject(faultproxy.ServerError(faultproxy.Op("TransactWriteItems"), 0))
		h := lambdaidem.SQS(store, e.addEffect(t, "first", &runs), e.opts()...)
		_, _ = h(context.Background(), batch(message("m1", "k1", 1)))
		e.wantEffectWithCompletion(t, "k1")
		if got := e.effectsOf(t, "k1"); len(got) != 0 {
			t.Fatalf("effect rows %v although no transaction reached DynamoDB", got)
		}

		proxy.ClearFaults()
		e.clock.Advance(2 * time.Minute)
		resp, err := h(context.Background(), batch(message("m1", "k1", 2)))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("redelivery: failures %v, error %v", resp.BatchItemFailures, err)
		}
		e.wantEffectWithCompletion(t, "k1")
		if got := e.effectsOf(t, "k1"); len(got) != 1 || runs.get() != 2 {
			t.Fatalf("effect rows %v after %d runs, want one row from the second run", got, runs.get())
		}
	})
}

// TestUnconfirmedTransactionalCompletionIsNotAcknowledged: when the
// transaction that carries the effect cannot be confirmed, the effect may
// not have happened, so the message must stay with SQS. Acknowledging it
// (as for a plain completion, whose effect did happen) would lose the
// message: the record stays IN_PROGRESS and nothing delivers it again.
func TestUnconfirmedTransactionalCompletionIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store, proxy := e.proxied(t)
	var runs counter
	var rep reports
	proxy.Inject(faultproxy.ServerError(faultproxy.Op("TransactWriteItems"), 0))
	h := lambdaidem.SQS(store, e.addEffect(t, "first", &runs), e.opts(rep.hook())...)
	resp, _ := h(context.Background(), batch(message("m1", "k1", 1)))
	if got := e.effectsOf(t, "k1"); len(got) != 0 {
		t.Fatalf("effect rows %v although no transaction reached DynamoDB", got)
	}
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v: an unconfirmed transactional completion was acknowledged (%+v)", resp.BatchItemFailures, rep.all())
	}
	if r := e.record(t, "k1"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("record %s, want IN_PROGRESS until its lease decides", r.Status)
	}
	// Once the lease ends, the redelivery runs again and commits once.
	proxy.ClearFaults()
	e.clock.Advance(2 * time.Minute)
	resp, _ = h(context.Background(), batch(message("m1", "k1", 2)))
	if len(resp.BatchItemFailures) != 0 || len(e.effectsOf(t, "k1")) != 1 || runs.get() != 2 {
		t.Fatalf("redelivery: failures %v, effect rows %v, runs %d", resp.BatchItemFailures, e.effectsOf(t, "k1"), runs.get())
	}
}

// TestTransactionalEffectConditionCancelsTheCompletion: the effect's own
// condition (attribute_not_exists on a row that exists) cancels the whole
// transaction. The decorator reports which write failed and why, the
// record is not COMPLETED, and nothing of the transaction applied.
func TestTransactionalEffectConditionCancelsTheCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.db.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(e.effects),
		Item: map[string]dbtypes.AttributeValue{
			"pk":  &dbtypes.AttributeValueMemberS{Value: "invoice-7"},
			"key": &dbtypes.AttributeValueMemberS{Value: "someone else"},
			"by":  &dbtypes.AttributeValueMemberS{Value: "already there"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	var rep reports
	h := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
		// Two writes: a fresh row that would succeed, and the invoice
		// row whose condition fails.
		if err := lambdaidem.AddCompletionWrite(ctx, e.effectWrite(t, m.Body, "first")); err != nil {
			return err
		}
		return lambdaidem.AddCompletionWrite(ctx, e.effectWriteAt("invoice-7", m.Body, "second"))
	}, e.opts(rep.hook())...)
	resp, _ := h(context.Background(), batch(message("m1", "k1", 1)))
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want the record failed (SQS keeps it)", resp.BatchItemFailures)
	}
	r := rep.all()[0]
	if r.Outcome != lambdaidem.OutcomeFailed {
		t.Errorf("outcome %s, want failed", r.Outcome)
	}
	var txErr *dynamo.TransactionError
	if !errors.As(r.Err, &txErr) {
		t.Fatalf("record error %v, want a *dynamo.TransactionError", r.Err)
	}
	if errors.Is(r.Err, lambdaidem.ErrLeaseLost) || errors.Is(r.Err, lambdaidem.ErrStoreUnavailable) {
		t.Errorf("record error %v: the lease was fine and the store answered", r.Err)
	}
	if len(txErr.Failures) != 1 || txErr.Failures[0].Index != 1 || txErr.Failures[0].Code != "ConditionalCheckFailed" {
		t.Fatalf("failures %+v, want write 1 ConditionalCheckFailed", txErr.Failures)
	}
	if got := str(txErr.Failures[0].Item, "by"); got != "already there" {
		t.Errorf("the refused write's item (ALL_OLD) has by=%q, want the existing row", got)
	}
	t.Logf("reported: %v", r.Err)
	if rec := e.record(t, "k1"); rec.Status != lambdaidem.StatusFailed {
		t.Errorf("record %s, want FAILED (retryable), never COMPLETED", rec.Status)
	}
	if got := e.effectsOf(t, "k1"); len(got) != 0 {
		t.Errorf("effect rows %v: the first write applied although the transaction was canceled", got)
	}
}

func outcomes(rs []lambdaidem.RecordReport) []lambdaidem.Outcome {
	out := make([]lambdaidem.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}
