package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Why Resolve changes nothing.
var (
	// ErrTooSoon: the record was marked outcome_unknown less than
	// ResolveOptions.FunctionTimeout ago. An attempt that lost its lease
	// (a paused or slow instance) may still be running, and may still
	// have its effect, until its invocation times out: a decision taken
	// before then may be wrong.
	ErrTooSoon = errors.New("sqsqueue: too soon to decide: the uncertain attempt may still be running")
	// ErrCopyNotFound: a not_applied decision sends the record's
	// dead-letter copy back, and the queue did not show it (in flight
	// with another consumer, deleted, or past the queue's retention).
	// Nothing was changed: try again, or resolve with WithoutCopy when
	// the copy is gone for good.
	ErrCopyNotFound = errors.New("sqsqueue: the record's dead-letter copy is not in the queue")
)

// DefaultFunctionTimeout is ResolveOptions.FunctionTimeout's default:
// Lambda's longest timeout.
const DefaultFunctionTimeout = 15 * time.Minute

// ResolveOptions is an operator's decision on one record whose outcome is
// unknown, and what Resolve needs to carry it out.
type ResolveOptions struct {
	// Store records the decision (idemstore.Admin.Resolve). Required.
	Store idemstore.Admin
	// Record is the record as the operator read it (a Get) and decided
	// on: the decision applies only while the record still carries its
	// lease token and dead-letter copy (idemstore.ErrRecordChanged
	// otherwise). Required.
	Record idemstore.Record
	// Decision is what the operator found (idemstore.ResolutionApplied,
	// ResolutionNotApplied, ResolutionAbandoned); By names them, Note
	// says why. They are kept on the record (ResolutionNote).
	Decision idemstore.Resolution
	By       string
	Note     string
	// FunctionTimeout is the function's timeout: a decision is refused
	// (ErrTooSoon) until this long after the record was marked (its
	// UpdatedAt), since an attempt that lost its lease may still run, and
	// have its effect, until its invocation ends. Zero means
	// DefaultFunctionTimeout.
	FunctionTimeout time.Duration
	// Queue is the dead-letter queue's side, as for Redrive: Client and
	// DeadLetterQueueURL to find the record's copy, and for a
	// not_applied decision SourceQueues or TargetQueueURL (with
	// QueueURLs, QueueURLFunc, WaitTime, VisibilityTimeout) to send it
	// back. Resolve sets its Resetter, Records, CopyIDs,
	// IncludeOutcomeUnknown and Now; Progress, when set, sees the copy's
	// event. Without a Client, an applied decision leaves the copy for
	// redrive to delete as done, and a not_applied one of a record with
	// a copy is refused unless WithoutCopy.
	Queue RedriveOptions
	// WithoutCopy carries out a not_applied decision in the store only,
	// leaving the copy where it is: for a copy that is gone from the
	// queue for good (deleted by hand, past its retention). The key then
	// runs on the next message that carries it, and none is on its way:
	// the source message was acknowledged when its copy was sent.
	WithoutCopy bool
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// ResolveResult is what Resolve did.
type ResolveResult struct {
	// Record is the record as the decision left it, or the record that
	// refused it.
	Record idemstore.Record
	// Copy is what became of the record's dead-letter copy: for applied,
	// RedriveAlreadyDone once deleted; for not_applied, the redrive's
	// event (RedriveMoved once sent back and deleted). Its Outcome is ""
	// when Resolve did not handle the copy (none, not looked for, or not
	// found).
	Copy RedriveEvent
}

// Resolve carries out an operator's decision on a record whose outcome is
// unknown (DEAD_LETTERED as outcome_unknown):
//
//   - applied: the store makes the record COMPLETED (with lambdaidem's
//     "result not stored" mark as its result), then the copy is found in
//     the dead-letter queue and deleted. A copy the queue does not show
//     stays; redrive deletes it as done when it meets it.
//   - not_applied: the copy is found and redriven as Redrive does, the
//     store's decision (a reset) taking the place of the reset, so the
//     key runs once more. A copy the queue does not show changes nothing
//     (ErrCopyNotFound). A record without a copy (a Wrap key), or with
//     WithoutCopy, is reset in the store only.
//   - abandoned: the store marks the record; the copy stays where it is,
//     and no redrive sends it back.
//
// It refuses, changing nothing, a record that is not uncertain
// (idemstore.ErrNotOutcomeUnknown, ErrResolved), one marked less than
// FunctionTimeout ago (ErrTooSoon), and a record that changed since it
// was read (idemstore.ErrRecordChanged); an error from the store or the
// queue comes back with what was done so far.
func Resolve(ctx context.Context, opts ResolveOptions) (ResolveResult, error) {
	res := ResolveResult{Record: opts.Record}
	r := opts.Record
	switch {
	case opts.Store == nil:
		return res, fmt.Errorf("%w: no Store", ErrInvalidOptions)
	case r.Namespace == "" || r.Key == "":
		return res, fmt.Errorf("%w: no Record (read the record first)", ErrInvalidOptions)
	case opts.FunctionTimeout < 0:
		return res, fmt.Errorf("%w: negative FunctionTimeout", ErrInvalidOptions)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	at := now()
	req := idemstore.ResolveRequest{
		Namespace: r.Namespace, Key: r.Key, Decision: opts.Decision, Token: r.LeaseToken,
		DeadLetterMessageID: r.DeadLetterMessageID, Now: at, By: opts.By, Note: opts.Note,
	}
	if opts.Decision == idemstore.ResolutionApplied {
		req.Result = lambdaidem.NotStoredResult("an operator resolved the unknown outcome as applied: the effect happened, and no result was recorded")
	}
	if err := idemstore.CheckResolve(req); err != nil {
		return res, err
	}
	key := r.Namespace + "/" + r.Key
	if err := idemstore.ResolveRefusal(r, req); err != nil {
		return res, fmt.Errorf("sqsqueue: resolve %s: %w", key, err)
	}
	ft := opts.FunctionTimeout
	if ft == 0 {
		ft = DefaultFunctionTimeout
	}
	if settled := r.UpdatedAt.Add(ft); at.Before(settled) {
		return res, fmt.Errorf("%w: %s was marked %s at %s; decide after %s (the function's timeout, %s, later)",
			ErrTooSoon, key, r.DeadLetterReason, r.UpdatedAt.UTC().Format(time.RFC3339), settled.UTC().Format(time.RFC3339), ft)
	}
	copyID := r.CopyID()
	q := opts.Queue
	switch {
	case opts.Decision == idemstore.ResolutionNotApplied && copyID != "" && !opts.WithoutCopy:
		if q.Client == nil {
			return res, fmt.Errorf("%w: a not_applied decision sends copy %s back: give Queue a Client (or WithoutCopy, for a copy gone for good)", ErrInvalidOptions, copyID)
		}
		return resolveByRedrive(ctx, opts, req, now)
	case opts.Decision == idemstore.ResolutionApplied && copyID != "" && q.Client != nil:
		rec, err := opts.Store.Resolve(ctx, req)
		if err != nil {
			return resultOf(rec, res), err
		}
		res.Record = rec
		res.Copy, err = deleteCopy(ctx, q, copyID)
		res.Copy.Record = rec
		if err != nil {
			return res, fmt.Errorf("sqsqueue: %s is resolved as applied, but its copy %s stays in the queue, for redrive to delete as done: %w", key, copyID, err)
		}
		return res, nil
	}
	rec, err := opts.Store.Resolve(ctx, req)
	return resultOf(rec, res), err
}

// resultOf is res with the record a store call returned, when it returned
// one.
func resultOf(rec idemstore.Record, res ResolveResult) ResolveResult {
	if rec.Key != "" {
		res.Record = rec
	}
	return res
}

// resolveByRedrive carries out a not_applied decision on a record with a
// copy: a redrive of that one copy, whose reset is the store's decision.
func resolveByRedrive(ctx context.Context, opts ResolveOptions, req idemstore.ResolveRequest, now func() time.Time) (ResolveResult, error) {
	res := ResolveResult{Record: opts.Record}
	d := &deciding{store: opts.Store, req: req}
	q := opts.Queue
	q.Resetter, q.Records = d, opts.Store
	q.CopyIDs = []string{req.DeadLetterMessageID}
	q.IncludeOutcomeUnknown = true
	q.Reasons, q.Max, q.DryRun, q.Resend = nil, 0, false, false
	q.Now = now
	progress := q.Progress
	q.Progress = func(ev RedriveEvent) {
		res.Copy = ev
		if progress != nil {
			progress(ev)
		}
	}
	_, err := Redrive(ctx, q)
	if d.applied || d.err != nil {
		res.Record = d.rec
	}
	switch {
	case d.err != nil:
		// The store refused the decision (the record changed since it
		// was read); the copy went where the record says (deleted as
		// done, or left).
		return res, d.err
	case err != nil:
		return res, err
	case res.Copy.Outcome == "":
		return res, fmt.Errorf("%w: copy %s of %s/%s (in flight with another consumer, deleted, or past the queue's retention): nothing changed; try again, or resolve without the copy if it is gone for good",
			ErrCopyNotFound, req.DeadLetterMessageID, req.Namespace, req.Key)
	case res.Copy.Outcome != RedriveMoved:
		if d.applied {
			return res, fmt.Errorf("sqsqueue: %s/%s resolved not_applied, but its copy %s was not sent back (%s at step %s: %w); the record is reset for it, so redrive leaves it (ErrSentBefore) unless -resend: send it with redrive -resend -copy %s",
				req.Namespace, req.Key, req.DeadLetterMessageID, res.Copy.Outcome, res.Copy.Step, res.Copy.Err, req.DeadLetterMessageID)
		}
		return res, fmt.Errorf("sqsqueue: copy %s of %s/%s not sent back, nothing changed (%s at step %s): %w",
			req.DeadLetterMessageID, req.Namespace, req.Key, res.Copy.Outcome, res.Copy.Step, res.Copy.Err)
	}
	return res, nil
}

// deciding is a DeadLetterResetter whose reset is an operator's
// not_applied decision: Redrive calls it for the one copy it redrives.
type deciding struct {
	store   idemstore.Admin
	req     idemstore.ResolveRequest
	applied bool
	rec     idemstore.Record
	err     error
}

// ResetDeadLetter records the decision. A refusal comes back as a reset
// refusal (ErrResetRefused), with the record, so that Redrive treats the
// copy as the record now says; the store's own error is kept for Resolve.
func (d *deciding) ResetDeadLetter(ctx context.Context, reset idemstore.ResetRequest) (idemstore.Record, error) {
	req := d.req
	req.Now = reset.Now
	rec, err := d.store.Resolve(ctx, req)
	d.rec = rec
	switch {
	case err == nil:
		d.applied = true
		return rec, nil
	case errors.Is(err, idemstore.ErrRecordChanged), errors.Is(err, idemstore.ErrNotOutcomeUnknown), errors.Is(err, idemstore.ErrResolved):
		d.err = err
		return rec, fmt.Errorf("%w: %w", idemstore.ErrResetRefused, err)
	}
	d.err = err
	return rec, err
}

// deleteCopy finds the copy copyID in the dead-letter queue and deletes
// it, making every other message it received visible again. A copy the
// queue does not show is left (the event's Outcome is "").
func deleteCopy(ctx context.Context, q RedriveOptions, copyID string) (RedriveEvent, error) {
	ev := RedriveEvent{DeadLetterMessageID: copyID}
	if q.DeadLetterQueueURL == "" {
		return ev, fmt.Errorf("%w: no DeadLetterQueueURL", ErrInvalidOptions)
	}
	if err := CheckQueueURL(q.DeadLetterQueueURL); err != nil {
		return ev, fmt.Errorf("%w: DeadLetterQueueURL: %w", ErrInvalidOptions, err)
	}
	vis := q.VisibilityTimeout
	if vis <= 0 {
		vis = DefaultRedriveVisibility
	}
	wait := receiveWait(q.WaitTime)
	seen := map[string]bool{}
	var left []string
	defer func() { release(q.Client, q.DeadLetterQueueURL, left) }()
	for {
		if err := ctx.Err(); err != nil {
			return ev, err
		}
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &q.DeadLetterQueueURL,
			MaxNumberOfMessages:         10,
			VisibilityTimeout:           int32(ClampVisibility(vis) / time.Second),
			WaitTimeSeconds:             int32(min(ClampVisibility(wait), 20*time.Second) / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return ev, wrap(err, "receive from dead-letter queue %s", q.DeadLetterQueueURL)
		}
		fresh := 0
		var found *types.Message
		for _, m := range out.Messages {
			if id := deref(m.MessageId); id == copyID {
				found = &m
				continue
			} else if !seen[id] {
				fresh++
				seen[id] = true
			}
			left = append(left, deref(m.ReceiptHandle))
		}
		if found != nil {
			ev.Metadata = copyOf(*found).Metadata
			if _, err := q.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.DeadLetterQueueURL, ReceiptHandle: found.ReceiptHandle}); err != nil {
				left = append(left, deref(found.ReceiptHandle))
				ev.Step, ev.Outcome, ev.Err = StepDelete, RedriveFailed, wrap(err, "delete message %s from %s", copyID, q.DeadLetterQueueURL)
				return ev, ev.Err
			}
			ev.Outcome = RedriveAlreadyDone
			if q.Progress != nil {
				q.Progress(ev)
			}
			return ev, nil
		}
		if fresh == 0 {
			return ev, nil
		}
	}
}
