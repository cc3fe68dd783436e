package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestFailingMessageIsDeadLetteredAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(alwaysFail),
		b.opts(lambdaidem.WithMaxAttempts(3), lambdaidem.WithDeadLetterSink(b.sink))...)
	for i := 1; i <= 3; i++ {
		resp, _ := h(context.Background(), batch(redelivered(msg("m1", "x"), i)))
		if i < 3 {
			wantFailed(t, resp, "m1")
			if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed || r.Attempts != i {
				t.Fatalf("after attempt %d: %s attempts=%d", i, r.Status, r.Attempts)
			}
		} else {
			wantFailed(t, resp) // acknowledged: it is in the DLQ now
		}
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonMaxAttempts {
		t.Fatalf("dead letters %v", got)
	}
	dl := b.sink.sent[0]
	if dl.Attempts != 3 || dl.Error == "" || dl.Key != "m1" || dl.Namespace != ns || dl.FirstAttemptAt.IsZero() || dl.Message.Body != "x" {
		t.Fatalf("dead letter lacks metadata: %+v", dl)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetteredMessageID != "m1" || r.DeadLetterMessageID != "dlq-1" {
		t.Fatalf("record %+v", r)
	}
	// A redelivery of the dead-lettered message itself is acknowledged.
	resp, _ := h(context.Background(), batch(redelivered(msg("m1", "x"), 4)))
	wantFailed(t, resp)
	if b.calls.get("m1") != 3 || len(b.sink.reasons()) != 1 {
		t.Fatalf("calls %d, dead letters %d", b.calls.get("m1"), len(b.sink.reasons()))
	}
}

func TestPoisonDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("schema v0 is not supported"))
	}, b.opts(lambdaidem.WithDeadLetterSink(b.sink))...)
	resp, err := h(context.Background(), batch(msg("m1", "x")))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonPoison {
		t.Fatalf("dead letters %v", got)
	}
}

// crashSim makes a process "die": from the moment crash is called until
// revive, every store operation fails, so nothing more is recorded, exactly
// as when the function is killed.
type crashSim struct{ b *bundle }

func (c crashSim) crash() {
	c.b.store.SetFault(func(string) error { return errors.New("process is dead") })
}

func (c crashSim) revive() { c.b.store.SetFault(nil) }

// A message that kills the process every time is dead-lettered by its
// attempt count, without the handler ever running past the maximum, and its
// batch-mates are not dragged along (docs/design.md, rule 4). Without isolation they
// would be: the subtest with isolation off shows the failure it prevents.
func TestCrashingMessageIsDeadLetteredAndInnocentsAreNot(t *testing.T) {
	t.Parallel()
	for _, isolate := range []bool{true, false} {
		t.Run(fmt.Sprintf("isolate=%v", isolate), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			sim := crashSim{b}
			// One round is one invocation. When its records run concurrently,
			// the innocent ones are mid-flight when the process dies.
			type round struct {
				concurrent bool
				entered    sync.WaitGroup
				crashed    chan struct{}
			}
			var cur *round
			// Each round is a fresh process: a crash takes the container's
			// memory with it.
			newProcess := func() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
					if m.Body == "crash" {
						if cur.concurrent {
							cur.entered.Wait()
						}
						sim.crash()
						close(cur.crashed)
						return errors.New("killed")
					}
					if cur.concurrent {
						cur.entered.Done()
						<-cur.crashed
					}
					return nil
				}), b.opts(lambdaidem.WithMaxAttempts(3), lambdaidem.WithDeadLetterSink(b.sink),
					lambdaidem.WithIsolateRedeliveries(isolate), lambdaidem.WithConcurrency(10),
					lambdaidem.WithLease(time.Minute))...)
			}

			for receive := 1; receive <= 6 && b.status("crash") != lambdaidem.StatusDeadLettered; receive++ {
				var recs []events.SQSMessage
				for _, id := range []string{"crash", "a", "b"} {
					if st := b.status(id); st == lambdaidem.StatusCompleted || st == lambdaidem.StatusDeadLettered {
						continue // deleted from the queue
					}
					recs = append(recs, redelivered(msg(id, id), receive))
				}
				cur = &round{concurrent: receive == 1 || !isolate, crashed: make(chan struct{})}
				cur.entered.Add(len(recs) - 1)
				_, _ = newProcess()(context.Background(), batch(recs...))
				sim.revive()
				b.clock.Advance(2 * time.Minute) // every abandoned lease runs out
			}
			if got := b.record(t, "crash"); got.Status != lambdaidem.StatusDeadLettered || got.DeadLetterReason != lambdaidem.ReasonMaxAttempts {
				t.Fatalf("crashing message: %s/%s", got.Status, got.DeadLetterReason)
			}
			if n := b.calls.get("crash"); n != 3 {
				t.Fatalf("crashing handler ran %d times, want exactly the maximum 3", n)
			}
			for _, id := range []string{"a", "b"} {
				st := b.status(id)
				if isolate && st != lambdaidem.StatusCompleted {
					t.Errorf("innocent %s ended %s", id, st)
				}
				if !isolate && st != lambdaidem.StatusDeadLettered {
					t.Errorf("without isolation, innocent %s ended %s; the test no longer shows what isolation prevents", id, st)
				}
			}
		})
	}
}

func TestDeadLetterQueueOutageLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sink.err = errors.New("AWS.SimpleQueueService.NonExistentQueue")
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad data"))
	}), b.opts(lambdaidem.WithDeadLetterSink(b.sink))...)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	hr := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad data"))
	}, b.opts(lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu))...)

	resp, _ := hr(context.Background(), batch(msg("m1", "x")))
	wantFailed(t, resp, "m1") // SQS keeps it
	if rep := reps[0].Records[0]; rep.Outcome != lambdaidem.OutcomeDeadLetterFailed || !errors.Is(rep.Err, b.sink.err) {
		t.Fatalf("report %+v", rep)
	}
	if r := b.record(t, "m1"); r.Status == lambdaidem.StatusDeadLettered {
		t.Fatal("record marked DEAD_LETTERED although the send failed")
	}
	// The DLQ is back: the next delivery dead-letters it.
	b.sink.mu.Lock()
	b.sink.err = nil
	b.sink.mu.Unlock()
	resp, _ = h(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	wantFailed(t, resp)
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("status %s after the DLQ came back", r.Status)
	}
}

func TestOtherMessagesOfADeadLetteredKeyGoToTheDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(func(_ context.Context, m events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad"))
	}), b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink))...)
	_, _ = h(context.Background(), batch(msg("m1", `{"id":"k"}`)))
	// A producer duplicate, or a console redrive with a new message ID.
	resp, _ := h(context.Background(), batch(msg("m2", `{"id":"k"}`)))
	wantFailed(t, resp)
	got := b.sink.reasons()
	if len(got) != 2 || got[1] != lambdaidem.ReasonKeyDeadLettered {
		t.Fatalf("dead letters %v, want [poison key_already_dead_lettered]", got)
	}
	if b.calls.get("m2") != 0 {
		t.Fatal("the handler ran for a dead-lettered key")
	}
}

func TestKeyConflictIsDeadLetteredWithoutTouchingTheOtherRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink))...)
	_, _ = h(context.Background(), batch(msg("m1", `{"id":"k","v":1}`)))
	before := b.record(t, "k")
	resp, _ := h(context.Background(), batch(msg("m2", `{"id":"k","v":2}`)))
	wantFailed(t, resp)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonKeyConflict {
		t.Fatalf("dead letters %v", got)
	}
	if after := b.record(t, "k"); after.Status != before.Status || after.LeaseToken != before.LeaseToken || after.UpdatedAt != before.UpdatedAt {
		t.Fatalf("the other message's record changed: %+v -> %+v", before, after)
	}
}

func TestNoSinkFallsBackToSQSRedrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad"))
	}, b.opts()...)
	resp, _ := h(context.Background(), batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed {
		t.Fatalf("status %s, want FAILED", r.Status)
	}
}

// Changing the contents of a message attribute in the handler does not
// change the dead-letter copy.
func TestHandlerCannotChangeTheDeadLetterCopysAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := "v"
	m := msg("m1", "x")
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		"s":  {StringValue: &s, DataType: "String"},
		"b":  {BinaryValue: []byte("bin"), DataType: "Binary"},
		"sl": {StringListValues: []string{"a"}, DataType: "String"},
		"bl": {BinaryListValues: [][]byte{[]byte("x")}, DataType: "Binary"},
	}
	h := lambdaidem.SQS(b.store, func(_ context.Context, m events.SQSMessage) error {
		*m.MessageAttributes["s"].StringValue = "changed"
		m.MessageAttributes["b"].BinaryValue[0] = 'X'
		m.MessageAttributes["sl"].StringListValues[0] = "changed"
		m.MessageAttributes["bl"].BinaryListValues[0][0] = 'Y'
		return lambdaidem.Poison(errors.New("bad"))
	}, b.opts(lambdaidem.WithDeadLetterSink(b.sink))...)
	if _, err := h(context.Background(), batch(m)); err != nil {
		t.Fatal(err)
	}
	a := b.sink.sent[0].Message.MessageAttributes
	if *a["s"].StringValue != "v" || string(a["b"].BinaryValue) != "bin" || a["sl"].StringListValues[0] != "a" || string(a["bl"].BinaryListValues[0]) != "x" {
		t.Fatalf("the handler changed the dead-letter copy: %+v", a)
	}
}

// A holder that lost its lease never sends a dead-letter copy: its key was
// taken over and completed, and a copy of finished work in the DLQ would
// run again on redrive.
func TestStaleOwnerNeverDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	stale := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return lambdaidem.Poison(errors.New("bad input"))
	}, b.opts(opts...)...)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := stale(context.Background(), batch(msg("m1", "x"))); done <- resp }()
	<-entered
	b.clock.Advance(2 * time.Minute)
	fresh := lambdaidem.SQS(b.store, ok, b.opts(opts...)...)
	wantFailed(t, mustHandle(t, fresh, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
	close(release)
	wantFailed(t, <-done, "m1")
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies sent by a holder that lost its lease", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want the new holder's COMPLETED", r.Status)
	}
}

// takeoverSink lets another holder take the key over while the copy is
// being sent.
type takeoverSink struct {
	sink
	during func()
}

func (s *takeoverSink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.during()
	return s.sink.Send(ctx, dl)
}

// A final dead-letter mark refused after the send is never acknowledged:
// the holder that took the key over meanwhile finishes the dead-lettering
// the pending mark records, without running the handler.
func TestRefusedDeadLetterMarkIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &takeoverSink{}
	thief := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink))...)
	var thiefResp events.SQSEventResponse
	s.during = func() {
		b.clock.Advance(2 * time.Minute)
		thiefResp, _ = thief(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	}
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad input"))
	}, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(s))...)
	// The invocation has time left to record its outcome after the slow send.
	ctx, cancel := b.world().ctx(10 * time.Minute)
	defer cancel()
	resp, _ := h(ctx, batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	wantFailed(t, thiefResp)
	if n := b.calls.get("m1"); n != 0 {
		t.Fatalf("the new holder ran the handler %d times; it should finish the dead-lettering", n)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonPoison || r.DeadLetterMessageID != "dlq-1" {
		t.Fatalf("record %s (%s, copy %q), want DEAD_LETTERED as poison by the new holder's copy dlq-1", r.Status, r.DeadLetterReason, r.DeadLetterMessageID)
	}
}

// markFaults answers the final (not pending) DeadLetter as unavailable
// while on: the copy is sent, its mark cannot be written.
type markFaults struct {
	lambdaidem.Store
	mu sync.Mutex
	on bool
}

func (s *markFaults) DeadLetter(ctx context.Context, r idemstore.DeadLetterRequest) error {
	s.mu.Lock()
	on := s.on && !r.Pending
	s.mu.Unlock()
	if on {
		return fmt.Errorf("final mark: %w", lambdaidem.ErrStoreUnavailable)
	}
	return s.Store.DeadLetter(ctx, r)
}

func (s *markFaults) set(on bool) { s.mu.Lock(); s.on = on; s.mu.Unlock() }

// handle runs h on ev, whose records may fail.
func handle(h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent) events.SQSEventResponse {
	resp, _ := h(context.Background(), ev)
	return resp
}

func poisonous(context.Context, events.SQSMessage) error {
	return lambdaidem.Poison(errors.New("schema v0 is not supported"))
}

// A dead-letter copy whose final mark cannot be written is never stranded:
// the source message is kept (reported failed), and its redelivery to the
// same container writes the mark for the copy already sent, sending no
// second copy.
func TestUnwrittenFinalMarkKeepsTheMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	fs := &markFaults{Store: b.store, on: true}
	h := lambdaidem.SQS(fs, b.counting(poisonous), b.opts(lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu))...)
	wantFailed(t, handle(h, batch(msg("m1", "x"))), "m1")
	if got := reps[0].Records[0].Outcome; got != lambdaidem.OutcomeStoreError {
		t.Fatalf("outcome %s, want store_error", got)
	}
	if n := len(b.sink.reasons()); n != 1 {
		t.Fatalf("%d copies, want 1", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress || r.DeadLetterReason != lambdaidem.ReasonPoison {
		t.Fatalf("record %s (%q), want IN_PROGRESS with the pending poison mark", r.Status, r.DeadLetterReason)
	}

	fs.set(false)
	wantFailed(t, mustHandle(t, h, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeDeadLettered {
		t.Fatalf("redelivery outcome %s, want dead_lettered", got)
	}
	if n, c := len(b.sink.reasons()), b.calls.get("m1"); n != 1 || c != 1 {
		t.Fatalf("%d copies and %d handler runs, want 1 and 1: the mark is written, nothing sent or run again", n, c)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterMessageID != "dlq-1" || r.DeadLetteredMessageID != "m1" {
		t.Fatalf("record %s, copy %q, source %q; want DEAD_LETTERED by dlq-1 for m1", r.Status, r.DeadLetterMessageID, r.DeadLetteredMessageID)
	}
	// Later deliveries are duplicates of the dead-lettered message.
	wantFailed(t, mustHandle(t, h, context.Background(), batch(redelivered(msg("m1", "x"), 3))))
	if got := reps[2].Records[0].Outcome; got != lambdaidem.OutcomeDeadLetteredDuplicate {
		t.Fatalf("third delivery %s, want dead_lettered_duplicate", got)
	}
}

// While the store still refuses the mark, a redelivery to the same
// container keeps the message again and sends no other copy.
func TestUnwrittenFinalMarkIsRetriedNotResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := &markFaults{Store: b.store, on: true}
	h := lambdaidem.SQS(fs, b.counting(poisonous), b.opts(lambdaidem.WithDeadLetterSink(b.sink))...)
	for i := 1; i <= 3; i++ {
		wantFailed(t, handle(h, batch(redelivered(msg("m1", "x"), i))), "m1")
	}
	if n, c := len(b.sink.reasons()), b.calls.get("m1"); n != 1 || c != 1 {
		t.Fatalf("%d copies and %d handler runs, want 1 and 1", n, c)
	}
}

// Another container that takes over a record left with a pending
// dead-letter mark finishes the dead-lettering with the recorded reason
// instead of running the handler; the first container's remembered mark
// is then refused, and its redelivery is a duplicate of the dead-lettered
// message. Nothing is stranded: the record names the new copy, and the
// first copy is a spare of the same payload.
func TestTakeoverFinishesAPendingDeadLetter(t *testing.T) {
	t.Parallel()
	for _, amo := range []bool{false, true} {
		t.Run(fmt.Sprintf("atMostOnce=%v", amo), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
			if amo {
				opts = append(opts, lambdaidem.WithAtMostOnce())
			}
			fs := &markFaults{Store: b.store, on: true}
			first := lambdaidem.SQS(fs, b.counting(poisonous), b.opts(opts...)...)
			wantFailed(t, handle(first, batch(msg("m1", "x"))), "m1")
			fs.set(false)

			b.clock.Advance(2 * time.Minute)
			other := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
			wantFailed(t, mustHandle(t, other, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
			if c := b.calls.get("m1"); c != 1 {
				t.Fatalf("handler ran %d times, want once: the takeover finishes the dead-lettering", c)
			}
			got := b.sink.reasons()
			if len(got) != 2 || got[1] != lambdaidem.ReasonPoison {
				t.Fatalf("copies %v, want two, the second poison", got)
			}
			r := b.record(t, "m1")
			if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonPoison || r.DeadLetterMessageID != "dlq-2" {
				t.Fatalf("record %s (%s, copy %q), want DEAD_LETTERED as poison by dlq-2", r.Status, r.DeadLetterReason, r.DeadLetterMessageID)
			}
			wantFailed(t, mustHandle(t, first, context.Background(), batch(redelivered(msg("m1", "x"), 3))))
			if n := len(b.sink.reasons()); n != 2 {
				t.Fatalf("%d copies after the first container's redelivery, want 2", n)
			}
			if r2 := b.record(t, "m1"); r2.DeadLetterMessageID != "dlq-2" {
				t.Fatalf("the first container's late mark applied: copy %q", r2.DeadLetterMessageID)
			}
		})
	}
}
