package sqsqueue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// These tests hold what docs/redrive.md says of outcome_unknown copies and
// of an operator's decision on them: the real at-most-once decorator over
// the in-memory store and the real Sink make the copies, and Redrive,
// Resolve and Browse run against the emulator.

// Handler behaviours of an uncertainEnv.
const (
	behaveOK     = iota // the effect, then success
	behavePoison        // no effect, Poison
	behavePanic         // the effect, then a panic: the outcome is unknown
)

type uncertainEnv struct {
	*stateEnv
	behave  atomic.Int32
	effects atomic.Int32
}

// newUncertainEnv is a stateEnv whose function runs WithAtMostOnce, keyed
// by the idempotency-key attribute, with a handler that does what behave
// says and counts its effects.
func newUncertainEnv(t *testing.T) *uncertainEnv {
	t.Helper()
	b := setup(t)
	e := &uncertainEnv{stateEnv: &stateEnv{bundle: b, t: t, src: b.newQueue(t, "src", false, nil), dlq: b.newQueue(t, "dlq", false, nil), store: memstore.New()}}
	e.client = &flaky{Client: b.client, dlqURL: e.dlq.url}
	e.sink = NewSink(b.client, e.dlq.url)
	e.h = lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		switch e.behave.Load() {
		case behavePoison:
			return lambdaidem.Poison(errors.New("bad order"))
		case behavePanic:
			e.effects.Add(1)
			panic("the mail server hung up after accepting the email")
		}
		e.effects.Add(1)
		e.runs.Add(1)
		return nil
	}, lambdaidem.WithNamespace("ns"), lambdaidem.WithDeadLetterSink(e.sink), lambdaidem.WithKeyAttribute(keyAttr),
		lambdaidem.WithAtMostOnce(), lambdaidem.WithLogger(slog.New(slog.DiscardHandler)))
	return e
}

// deadLetter sends a message with key and delivers it while the handler
// behaves as b, so that it is dead-lettered; it returns the record.
func (e *uncertainEnv) deadLetter(key string, b int32) idemstore.Record {
	e.t.Helper()
	e.behave.Store(b)
	e.send(`{"to":"`+key+`@example.com"}`, key)
	e.deliver()
	r := e.record(key)
	if r.Status != idemstore.StatusDeadLettered {
		e.t.Fatalf("record of %s is %s, want DEAD_LETTERED", key, r.Status)
	}
	e.behave.Store(behaveOK)
	return r
}

// resolve carries out decision d on the record of key as it stands, with
// the environment's queues; the record counts as settled.
func (e *uncertainEnv) resolve(key string, d idemstore.Resolution, mod func(*ResolveOptions)) (ResolveResult, error) {
	e.t.Helper()
	o := ResolveOptions{
		Store: e.store, Record: e.record(key), Decision: d, By: "ops@example.com", Note: "checked the mail server's log",
		FunctionTimeout: time.Second, Now: func() time.Time { return time.Now().Add(time.Minute) },
		Queue: RedriveOptions{Client: e.client, DeadLetterQueueURL: e.dlq.url, SourceQueues: []string{e.src.arn}, WaitTime: -1},
	}
	if mod != nil {
		mod(&o)
	}
	return Resolve(e.ctx, o)
}

// byReason indexes a run's events by the copy's reason.
func byReason(evs []RedriveEvent) map[idemstore.Reason]RedriveEvent {
	m := map[idemstore.Reason]RedriveEvent{}
	for _, ev := range evs {
		m[ev.Metadata.Reason] = ev
	}
	return m
}

// By default a redrive, dry or real, leaves an outcome_unknown copy in
// the DLQ and says why, copy by copy; its record stays as it was. Asked
// by name, it sends the copy back like any other.
func TestRedriveLeavesOutcomeUnknownUnlessAsked(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("poison-1", behavePoison)
	before := e.deadLetter("mail-1", behavePanic)
	if before.DeadLetterReason != idemstore.ReasonOutcomeUnknown || e.effects.Load() != 1 {
		t.Fatalf("record %s (%s), %d effects; want outcome_unknown after 1 effect", before.Status, before.DeadLetterReason, e.effects.Load())
	}
	for _, dry := range []bool{true, false} {
		sum, evs := e.redrive(func(o *RedriveOptions) { o.DryRun, o.Records = dry, e.store })
		ev := byReason(evs)[idemstore.ReasonOutcomeUnknown]
		if ev.Outcome != RedriveSkipped || !errors.Is(ev.Err, ErrUncertain) || ev.Step != StepCheck {
			t.Fatalf("dry run %t: outcome_unknown copy %s at %s: %v; want skipped with ErrUncertain", dry, ev.Outcome, ev.Step, ev.Err)
		}
		for _, want := range []string{"ns/mail-1", "DEAD_LETTERED by this copy", "-include-outcome-unknown", "lambdaidem resolve"} {
			if !strings.Contains(ev.Err.Error(), want) {
				t.Errorf("dry run %t: the reason %q does not say %q", dry, ev.Err, want)
			}
		}
		if sum.Moved != 1 || sum.Skipped != 1 {
			t.Errorf("dry run %t: summary %+v, want the poison copy moved and the other skipped", dry, sum)
		}
	}
	if r := e.record("mail-1"); r.LeaseToken != before.LeaseToken || r.Status != idemstore.StatusDeadLettered {
		t.Errorf("the record of the copy left behind changed: %s", r.Status)
	}
	if n := e.count(e.dlq); n != 1 {
		t.Fatalf("DLQ holds %d copies, want the outcome_unknown one", n)
	}
	_, evs := e.redrive(func(o *RedriveOptions) { o.IncludeOutcomeUnknown = true })
	wantOne(t, evs, RedriveMoved, nil)
	e.deliver()
	if e.effects.Load() != 3 || e.count(e.dlq) != 0 {
		t.Errorf("%d effects (want 3: the lost one, the redriven poison, the redriven email), DLQ %d", e.effects.Load(), e.count(e.dlq))
	}
}

func TestRedriveReasons(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("poison-1", behavePoison)
	e.deadLetter("mail-1", behavePanic)
	_, evs := e.redrive(func(o *RedriveOptions) { o.Reasons = []idemstore.Reason{idemstore.ReasonMaxAttempts} })
	for _, ev := range evs {
		if ev.Outcome != RedriveSkipped || !errors.Is(ev.Err, ErrReasonNotSelected) {
			t.Errorf("copy %s (%s): %s, %v; want skipped with ErrReasonNotSelected", ev.DeadLetterMessageID, ev.Metadata.Reason, ev.Outcome, ev.Err)
		}
	}
	for _, bad := range [][]idemstore.Reason{{idemstore.ReasonOutcomeUnknown}, {"poisson"}} {
		_, err := Redrive(e.ctx, RedriveOptions{Client: e.client, DeadLetterQueueURL: e.dlq.url, SourceQueues: []string{e.src.arn}, Resetter: e.store, Reasons: bad})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Reasons %q = %v, want ErrInvalidOptions", bad, err)
		}
	}
	sum, evs := e.redrive(func(o *RedriveOptions) {
		o.Reasons, o.IncludeOutcomeUnknown = []idemstore.Reason{idemstore.ReasonOutcomeUnknown}, true
	})
	if sum.Moved != 1 || byReason(evs)[idemstore.ReasonPoison].Outcome != RedriveSkipped {
		t.Errorf("only outcome_unknown asked for: %+v", sum)
	}
}

// CopyIDs handles the copies named and leaves the others unreported.
func TestRedriveCopyIDs(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("poison-1", behavePoison)
	second := e.deadLetter("poison-2", behavePoison)
	_, evs := e.redrive(func(o *RedriveOptions) { o.CopyIDs = []string{second.DeadLetterMessageID} })
	if ev := wantOne(t, evs, RedriveMoved, nil); ev.DeadLetterMessageID != second.DeadLetterMessageID {
		t.Errorf("moved %s, want %s", ev.DeadLetterMessageID, second.DeadLetterMessageID)
	}
	if r := e.record("poison-1"); r.Status != idemstore.StatusDeadLettered || e.count(e.dlq) != 1 {
		t.Errorf("the other copy: record %s, DLQ %d; want it left", r.Status, e.count(e.dlq))
	}
}

// Resolved as applied: the record is COMPLETED, the copy deleted, and the
// key never runs again.
func TestResolveApplied(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	before := e.deadLetter("mail-1", behavePanic)
	e.deadLetter("poison-1", behavePoison)
	res, err := e.resolve("mail-1", idemstore.ResolutionApplied, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The copy is gone; the other, received on the way, is visible again
	// at once.
	if left := e.drain(t, e.dlq.url); res.Copy.Outcome != RedriveAlreadyDone || res.Copy.DeadLetterMessageID != before.DeadLetterMessageID || len(left) != 1 {
		t.Errorf("copy %s (%s), DLQ shows %d; want the copy deleted and the other left", res.Copy.DeadLetterMessageID, res.Copy.Outcome, len(left))
	}
	r := e.record("mail-1")
	if r.Status != idemstore.StatusCompleted || r.Resolution != idemstore.ResolutionApplied || !strings.Contains(r.ResolutionNote, "ops@example.com") {
		t.Errorf("record %s, resolution %q, note %q", r.Status, r.Resolution, r.ResolutionNote)
	}
	if _, ok := lambdaidem.ResultNotStored(r.Result); !ok {
		t.Errorf("result %q, want the not-stored mark", r.Result)
	}
	// The producer sends it again: a duplicate, never run.
	e.send(`{"to":"mail-1@example.com"}`, "mail-1")
	e.deliver()
	if n := e.effects.Load(); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// An applied decision whose copy was not deleted (held elsewhere): a
// default redrive deletes it as done.
func TestResolveAppliedCopyLeftIsDeletedByRedrive(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("mail-1", behavePanic)
	res, err := e.resolve("mail-1", idemstore.ResolutionApplied, func(o *ResolveOptions) { o.Queue = RedriveOptions{} })
	if err != nil || res.Copy.Outcome != "" || res.Record.Status != idemstore.StatusCompleted {
		t.Fatalf("store-only applied: %+v, %v", res, err)
	}
	_, evs := e.redrive(nil)
	wantOne(t, evs, RedriveAlreadyDone, nil)
	if e.count(e.dlq) != 0 || e.count(e.src) != 0 {
		t.Errorf("DLQ %d, source %d; want the copy deleted, not sent", e.count(e.dlq), e.count(e.src))
	}
}

// Resolved as not applied: the copy is redriven, the key runs once more.
func TestResolveNotApplied(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	before := e.deadLetter("mail-1", behavePanic)
	res, err := e.resolve("mail-1", idemstore.ResolutionNotApplied, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copy.Outcome != RedriveMoved || res.Record.Status != idemstore.StatusFailed || res.Record.RedrivenFrom != before.DeadLetterMessageID {
		t.Fatalf("copy %s, record %s redriven from %q", res.Copy.Outcome, res.Record.Status, res.Record.RedrivenFrom)
	}
	if e.deliver() != 1 || e.effects.Load() != 2 {
		t.Fatalf("%d effects, want 2 (the lost one, and the one run again)", e.effects.Load())
	}
	r := e.record("mail-1")
	if r.Status != idemstore.StatusCompleted || r.Resolution != idemstore.ResolutionNotApplied || e.count(e.dlq) != 0 {
		t.Errorf("record %s with resolution %q, DLQ %d", r.Status, r.Resolution, e.count(e.dlq))
	}
	// A second decision on it is refused: it is no longer uncertain.
	if _, err := e.resolve("mail-1", idemstore.ResolutionNotApplied, nil); !errors.Is(err, idemstore.ErrNotOutcomeUnknown) {
		t.Errorf("second decision = %v, want ErrNotOutcomeUnknown", err)
	}
}

// A not_applied decision whose copy the queue does not show changes
// nothing; WithoutCopy resets the record alone.
func TestResolveNotAppliedCopyMissing(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	before := e.deadLetter("mail-1", behavePanic)
	// Another consumer holds the copy.
	for _, m := range e.receiveSome(t, e.dlq.url, 300) {
		if _, err := e.client.Client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &e.dlq.url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 300}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.resolve("mail-1", idemstore.ResolutionNotApplied, nil)
	if !errors.Is(err, ErrCopyNotFound) {
		t.Fatalf("Resolve with the copy in flight = %v, want ErrCopyNotFound", err)
	}
	if r := e.record("mail-1"); r.LeaseToken != before.LeaseToken {
		t.Errorf("the record changed: %s", r.Status)
	}
	res, err := e.resolve("mail-1", idemstore.ResolutionNotApplied, func(o *ResolveOptions) { o.WithoutCopy = true })
	if err != nil || res.Record.Status != idemstore.StatusFailed || res.Copy.Outcome != "" {
		t.Errorf("WithoutCopy: %s, copy %q, %v", res.Record.Status, res.Copy.Outcome, err)
	}
}

// Abandoned: kept, and never sent back, asked or not.
func TestResolveAbandoned(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("mail-1", behavePanic)
	res, err := e.resolve("mail-1", idemstore.ResolutionAbandoned, nil)
	if err != nil || !res.Record.Abandoned() {
		t.Fatalf("Resolve(abandoned): %+v, %v", res.Record, err)
	}
	for _, include := range []bool{false, true} {
		_, evs := e.redrive(func(o *RedriveOptions) { o.IncludeOutcomeUnknown = include })
		wantOne(t, evs, RedriveSkipped, ErrAbandoned)
	}
	if e.count(e.dlq) != 1 || e.count(e.src) != 0 {
		t.Errorf("DLQ %d, source %d; want the copy kept", e.count(e.dlq), e.count(e.src))
	}
	if _, err := e.resolve("mail-1", idemstore.ResolutionNotApplied, nil); !errors.Is(err, idemstore.ErrResolved) {
		t.Errorf("a later decision = %v, want ErrResolved", err)
	}
}

// Refused before anything changes: too soon, not uncertain, changed since
// read.
func TestResolveRefusals(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	before := e.deadLetter("mail-1", behavePanic)
	if _, err := e.resolve("mail-1", idemstore.ResolutionApplied, func(o *ResolveOptions) { o.FunctionTimeout, o.Now = 0, nil }); !errors.Is(err, ErrTooSoon) {
		t.Errorf("a decision just after the mark = %v, want ErrTooSoon", err)
	}
	if _, err := e.resolve("mail-1", idemstore.ResolutionApplied, func(o *ResolveOptions) { o.Record.LeaseToken = "stale" }); !errors.Is(err, idemstore.ErrRecordChanged) {
		t.Errorf("a decision on a stale read = %v, want ErrRecordChanged", err)
	}
	if _, err := e.resolve("mail-1", idemstore.ResolutionApplied, func(o *ResolveOptions) { o.By = "" }); !errors.Is(err, idemstore.ErrInvalidRequest) {
		t.Errorf("a decision without By = %v, want ErrInvalidRequest", err)
	}
	if r := e.record("mail-1"); r.LeaseToken != before.LeaseToken || e.count(e.dlq) != 1 {
		t.Errorf("a refusal changed the record (%s) or the DLQ (%d)", r.Status, e.count(e.dlq))
	}
	e.deadLetter("poison-1", behavePoison)
	if _, err := e.resolve("poison-1", idemstore.ResolutionApplied, nil); !errors.Is(err, idemstore.ErrNotOutcomeUnknown) {
		t.Errorf("a decision on a poison record = %v, want ErrNotOutcomeUnknown", err)
	}
}

// Browse shows every copy, decoded, and hands them all back at once.
func TestBrowse(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("poison-1", behavePoison)
	mail := e.deadLetter("mail-1", behavePanic)
	e.bundle.send(t, e.dlq, "not a copy", nil, "")
	res, err := Browse(e.ctx, BrowseOptions{Client: e.client, DeadLetterQueueURL: e.dlq.url, WaitTime: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Copies) != 3 || res.More || res.Unreleased != 0 {
		t.Fatalf("%d copies (more %t, unreleased %d), want 3", len(res.Copies), res.More, res.Unreleased)
	}
	var parsed int
	for _, c := range res.Copies {
		if c.ReceiveCount < 1 || c.SentAt.IsZero() {
			t.Errorf("copy %s: receive count %d, sent at %v", c.MessageID, c.ReceiveCount, c.SentAt)
		}
		switch {
		case c.ParseErr != nil:
			if !errors.Is(c.ParseErr, ErrNotDeadLetter) || c.Body != "not a copy" {
				t.Errorf("raw message: %v, body %q", c.ParseErr, c.Body)
			}
		case c.MessageID == mail.DeadLetterMessageID:
			parsed++
			if c.Metadata.Reason != idemstore.ReasonOutcomeUnknown || c.Metadata.Key != "mail-1" || !strings.Contains(c.Metadata.Error, "mail server") || c.Body != `{"to":"mail-1@example.com"}` {
				t.Errorf("outcome_unknown copy: %+v, body %q", c.Metadata, c.Body)
			}
		default:
			parsed++
		}
	}
	if parsed != 2 {
		t.Errorf("%d copies parsed, want 2", parsed)
	}
	// Handed back at once: a receive sees all three again, and nothing
	// was deleted.
	if got := e.drain(t, e.dlq.url); len(got) != 3 {
		t.Errorf("after the view the DLQ shows %d messages, want 3", len(got))
	}
}

func TestBrowseMax(t *testing.T) {
	t.Parallel()
	e := newUncertainEnv(t)
	e.deadLetter("poison-1", behavePoison)
	e.deadLetter("poison-2", behavePoison)
	res, err := Browse(e.ctx, BrowseOptions{Client: e.client, DeadLetterQueueURL: e.dlq.url, WaitTime: -1, Max: 1})
	if err != nil || len(res.Copies) != 1 || !res.More {
		t.Errorf("Max 1: %d copies, more %t, %v", len(res.Copies), res.More, err)
	}
	if _, err := Browse(e.ctx, BrowseOptions{Client: e.client}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no queue = %v, want ErrInvalidOptions", err)
	}
}
