package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// RedriveAPI is the part of *sqs.Client that Redrive uses.
type RedriveAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageAPI
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityAPI
	QueueURLGetter
}

// ErrInvalidOptions: Redrive was called without a client, a DLQ URL, a
// place to send messages (TargetQueueURL or SourceQueues) or, for a real
// run, a Resetter.
var ErrInvalidOptions = errors.New("sqsqueue: invalid redrive options")

// Why Redrive leaves a copy in the DLQ (RedriveEvent.Err wraps one of them
// when Outcome is RedriveSkipped, beside ErrNotDeadLetter and
// ErrInvalidARN). See docs/redrive.md for the full table.
var (
	// ErrSourceNotAllowed: the copy's source queue is not one of
	// RedriveOptions.SourceQueues. It is never followed: the metadata can
	// be written by anyone allowed to send to the DLQ.
	ErrSourceNotAllowed = errors.New("sqsqueue: source queue not among the queues named for this redrive")
	// ErrHandledThisRun: this run already handled the same source message
	// or key (another copy of it, or the copy of a message this run sent
	// back and that was dead-lettered again). A run handles each message at
	// most once, so it always ends.
	ErrHandledThisRun = errors.New("sqsqueue: message already handled in this run")
	// ErrConflictCopy: the copy was dead-lettered as a key conflict; its
	// key's record belongs to another message, which redrive never resets.
	ErrConflictCopy = errors.New("sqsqueue: key conflict: the key's record belongs to another message")
	// ErrNoKey: the copy names no idempotency key (missing_key,
	// malformed_body), so no record can show it was dead-lettered; sent
	// back only with RedriveOptions.Keyless.
	ErrNoKey = errors.New("sqsqueue: dead-letter copy without an idempotency key")
	// ErrSentBefore: an earlier run reset the record for this very copy
	// and tried to send it back (the copy's delete, or its send, failed).
	// Not sent again unless RedriveOptions.Resend.
	ErrSentBefore = errors.New("sqsqueue: an earlier redrive already sent this copy back")
	// ErrRedriveLimit: the record was redriven RedriveOptions.MaxRedrives
	// times already.
	ErrRedriveLimit = errors.New("sqsqueue: redrive limit reached")
	// ErrNotRedrivable: the record is not dead-lettered by this copy, so
	// resetting it could run work twice: absent (expired or forgotten),
	// held or retried by the function, or dead-lettered by another copy.
	ErrNotRedrivable = errors.New("sqsqueue: record was not dead-lettered by this copy")
	// ErrOtherCompletion: the key's record is COMPLETED, but nothing shows
	// that this copy's payload ran: the completion has another payload
	// hash (after the copy's record expired or was forgotten, a message
	// with the same key and another payload completed a new one), or the
	// copy carries no payload hash and was not the one sent back for that
	// record. Deleting the copy could lose work that never ran; sending it
	// back would have it dead-lettered as a key conflict. A person
	// decides.
	ErrOtherCompletion = errors.New("sqsqueue: the key completed, but not with this copy's payload")
	// ErrMarkFinished: the record was still IN_PROGRESS with only the
	// pending dead-letter mark of the very lease this copy was sent under
	// (its holder sent the copy but could not write the final mark, and
	// stopped). Redrive wrote that final mark for this copy (a DryRun
	// would) and leaves the copy for the next run, which moves it: the
	// source message, if it is still queued, is meanwhile acknowledged as
	// dead-lettered on its next delivery instead of running beside the
	// copy sent back.
	ErrMarkFinished = errors.New("sqsqueue: the record held only this copy's pending dead-letter mark; marked for this copy, it moves on the next run")
	// ErrUncertain: the copy was dead-lettered as outcome_unknown: its
	// handler declared the outcome unknown (lambdaidem.OutcomeUnknown), or
	// its at-most-once attempt ended without a recorded outcome (a crash,
	// a timeout, a panic, an error not declared NotApplied), so its
	// effect (an email, a payment, a message to the next queue) may have
	// happened, and sending it back could repeat it. Such a copy goes
	// back only with RedriveOptions.IncludeOutcomeUnknown, once someone
	// found that the effect did not happen; Resolve records that finding
	// one record at a time. A copy whose record was resolved as applied
	// is deleted as done.
	ErrUncertain = errors.New("sqsqueue: outcome_unknown: its attempt may have had its effect, and sending it back could repeat it")
	// ErrReasonNotSelected: the copy's reason is not among
	// RedriveOptions.Reasons.
	ErrReasonNotSelected = errors.New("sqsqueue: reason not among the reasons named for this redrive")
	// ErrAbandoned: an operator abandoned the copy's record (Resolve with
	// idemstore.ResolutionAbandoned): it is never sent back. Delete the
	// copy by hand, or leave it to the queue's retention.
	ErrAbandoned = errors.New("sqsqueue: an operator abandoned the record: its copy is never sent back")
)

// DeadLetterMarker writes a dead-letter mark (every idemstore.Store is
// one). Redrive uses it only for ErrMarkFinished.
type DeadLetterMarker interface {
	DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error
}

// Defaults of RedriveOptions.
const (
	DefaultRedriveVisibility = time.Minute
	DefaultRedriveWait       = 2 * time.Second
)

// RedriveOptions configures Redrive.
type RedriveOptions struct {
	// Client talks to SQS. Required.
	Client RedriveAPI
	// DeadLetterQueueURL is the DLQ to drain. Required.
	DeadLetterQueueURL string
	// TargetQueueURL, when set, receives every message. Otherwise each goes
	// back to its source queue, which must be one of SourceQueues.
	TargetQueueURL string
	// SourceQueues are the ARNs of the queues messages may be sent back to.
	// A copy whose metadata names another source is skipped
	// (ErrSourceNotAllowed), with or without TargetQueueURL. Required
	// unless TargetQueueURL is set. Each URL is asked of SQS (GetQueueUrl,
	// by name and owner account) once, unless QueueURLs or QueueURLFunc
	// give it.
	SourceQueues []string
	// Resetter resets the idempotency record of each copy before it is
	// sent back, in one conditional write that applies only to a record
	// this copy dead-lettered (every store of the module implements it).
	// Required unless DryRun.
	Resetter idemstore.DeadLetterResetter
	// Marker writes the final dead-letter mark of a copy whose record
	// holds only that copy's pending mark (ErrMarkFinished). Nil means
	// the Resetter, when it is a DeadLetterMarker (every store of the
	// module is); without one such copies are skipped (ErrNotRedrivable).
	Marker DeadLetterMarker
	// Records reads the idempotency records (every Store does); nil means
	// the Resetter, when it reads records. A DryRun needs it: it reads
	// each copy's record and says what a real run would do with the copy
	// if the record stayed as it is. A real run reads only the records of
	// outcome_unknown copies it was not asked to send back, to delete
	// those whose work is done (the reset reads the others in the same
	// write).
	Records RecordReader
	// Now is the clock resets are judged by. Nil means time.Now.
	Now func() time.Time
	// MaxRedrives, when positive, leaves in the DLQ copies whose record
	// was redriven that many times already (ErrRedriveLimit).
	MaxRedrives int
	// Resend sends back a copy an earlier run already reset the record for
	// and tried to send (ErrSentBefore), without a new reset. Safe only
	// when the key survives a redrive (a key from the body or an
	// attribute): the decorator then acknowledges the second arrival as a
	// duplicate. With message-ID or deduplication-ID keys the redriven
	// message gets a new key, and a resent copy can run twice.
	Resend bool
	// Keyless sends back copies that name no idempotency key (missing_key,
	// malformed_body) without a reset. Off by default: nothing on the
	// record side vouches for such a copy, so anyone able to send to the
	// DLQ could have written it.
	Keyless bool
	// IncludeOutcomeUnknown sends back copies dead-lettered as
	// outcome_unknown, like any other. Off by default: such a copy's
	// effect may have happened (ErrUncertain), so without it the copy
	// stays, unless its record shows the work done (resolved as applied,
	// or completed with its payload), when it is deleted as done; the
	// run reads the record for that (Records, else the Resetter when it
	// reads records, as every store of the module does). Set it only
	// once someone found that the effects of every such copy the run
	// may meet did not happen; Resolve decides one record at a time.
	IncludeOutcomeUnknown bool
	// Reasons, when set, handles only copies dead-lettered for one of
	// these reasons; the others stay, each reported with
	// ErrReasonNotSelected. Naming idemstore.ReasonOutcomeUnknown needs
	// IncludeOutcomeUnknown too (ErrInvalidOptions otherwise).
	Reasons []idemstore.Reason
	// CopyIDs, when set, handles only the dead-letter copies with these
	// IDs (as the DLQ gave them: what Browse and "lambdaidem dlq" show),
	// and leaves every other message as it is, unreported. The run ends
	// once each was handled, or when the queue shows no message the run
	// has not seen.
	CopyIDs []string
	// Max is the most messages to handle (moved, failed or skipped). Zero
	// means no limit: run until the DLQ has no message this run has not
	// seen.
	Max int
	// DryRun reports, for each copy, what a real run would do with it as
	// the records stand (move it, delete it as done, or skip it, for the
	// same reasons), and changes nothing but the messages' receive counts
	// (receiving is how SQS lists messages). It reads each copy's record
	// with Records. Listed messages are made visible again when the run
	// ends. A record that changes between the dry run and the real run
	// changes what the real run does.
	DryRun bool
	// VisibilityTimeout hides each received message from other consumers
	// (and from this run's later receives) while it is handled. Zero means
	// DefaultRedriveVisibility (one minute).
	VisibilityTimeout time.Duration
	// WaitTime is each receive's long-poll wait. Zero means
	// DefaultRedriveWait (2 s): without long polling SQS samples a subset
	// of its servers and may answer "empty" while messages remain. A
	// negative value uses short polling (emulators, tests).
	WaitTime time.Duration
	// Progress, when set, is called once per handled message, in order,
	// from the calling goroutine.
	Progress func(RedriveEvent)
	// QueueURLs and QueueURLFunc give source queue URLs by ARN, as
	// WithQueueURLs and WithQueueURLFunc do for VisibilityChanger, instead
	// of asking SQS.
	QueueURLs    map[string]string
	QueueURLFunc func(arn string) (string, error)
}

// RecordReader reads one idempotency record; every idemstore.Store is
// one.
type RecordReader interface {
	Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error)
}

// RedriveOutcome says what happened to one message.
type RedriveOutcome string

// The outcomes of one message.
const (
	// RedriveMoved: reset, sent to the target and deleted from the DLQ.
	RedriveMoved RedriveOutcome = "moved"
	// RedriveWouldMove: DryRun; the record as it stands lets the copy be
	// reset and sent back.
	RedriveWouldMove RedriveOutcome = "would_move"
	// RedriveAlreadyDone: the key's record is COMPLETED with this copy's
	// payload (the message this copy was sent back as completed it, or a
	// message with the same payload hash did), so the work is done: the
	// copy was deleted from the DLQ without being sent.
	RedriveAlreadyDone RedriveOutcome = "already_done"
	// RedriveWouldDeleteDone: DryRun; the record as it stands shows the
	// work done, as for RedriveAlreadyDone: the copy would be deleted
	// without being sent.
	RedriveWouldDeleteDone RedriveOutcome = "would_delete_done"
	// RedriveFailed: a step failed (Step and Err say which and why); the
	// message stays in the DLQ.
	RedriveFailed RedriveOutcome = "failed"
	// RedriveSkipped: left in the DLQ on purpose (in a DryRun: would be);
	// Err says why (not a lambdaidem copy, source not allowed, a reason
	// not selected, an outcome_unknown copy not asked for, key conflict,
	// record not dead-lettered by this copy or abandoned, completed with
	// another payload, handled already in this run...).
	RedriveSkipped RedriveOutcome = "skipped"
)

// The steps of moving one message, in order.
const (
	StepParse  = "parse"
	StepCheck  = "check"
	StepTarget = "target"
	StepReset  = "reset"
	StepMark   = "mark"
	StepSend   = "send"
	StepDelete = "delete"
)

// RedriveEvent reports one handled message.
type RedriveEvent struct {
	// DeadLetterMessageID is the message's ID in the DLQ.
	DeadLetterMessageID string
	// Metadata is the decoded metadata (zero when it could not be parsed).
	Metadata Metadata
	// TargetQueueURL is where the message goes (or would go).
	TargetQueueURL string
	// NewMessageID is the ID of the copy sent to the target (moved only).
	NewMessageID string
	// Record is the key's record after the reset, or the record that
	// refused it, or in a DryRun the record as read (zero when no reset
	// was tried, or the record is absent).
	Record  idemstore.Record
	Outcome RedriveOutcome
	// Step is the step that failed or decided to skip.
	Step string
	Err  error
}

// RedriveSummary counts the handled messages.
type RedriveSummary struct {
	// Moved counts moved messages, or in a DryRun the ones that would move.
	Moved int
	// Done counts copies deleted without sending because the work is
	// done, or in a DryRun the ones that would be.
	Done    int
	Failed  int
	Skipped int
}

// Redrive moves dead-letter copies from a DLQ back to their source queue
// (or TargetQueueURL) so that the decorator runs them again, without ever
// running work twice. Copies dead-lettered as outcome_unknown, whose
// effect may have happened, stay unless IncludeOutcomeUnknown asks for
// them by name (ErrUncertain; those whose record was resolved as applied
// are deleted as done). For each copy, in this order: check it (a
// lambdaidem copy, from an allowed source, of a selected reason, not a
// key conflict, not handled already in this run), reset its idempotency
// record with the Resetter (applies only
// when the record is DEAD_LETTERED by this very copy), send the original
// body and attributes (FIFO targets get the original MessageGroupId and a
// new deduplication ID), then delete it from the DLQ. A record COMPLETED
// with this copy's payload (it was redriven from this copy, or its payload
// hash is the copy's) means the work is done: the copy is deleted without
// being sent. Any other record state, a completion with another payload
// included, leaves the copy in the DLQ with the reason (docs/redrive.md
// has the table). A failure at any step stops that copy,
// which stays in the DLQ and is reported (Progress, Summary.Failed); the
// run goes on with the next one.
//
// A copy that fails after its reset (the send or the delete failed) stays
// in the DLQ; the next run finds its record already reset by it and skips
// it with ErrSentBefore (or sends it again with Resend), and deletes it
// once the key has completed.
//
// Redrive returns an error, with the summary so far, when the options are
// invalid, a receive fails, or ctx ends.
func Redrive(ctx context.Context, opts RedriveOptions) (RedriveSummary, error) {
	var sum RedriveSummary
	switch {
	case opts.Client == nil:
		return sum, fmt.Errorf("%w: no Client", ErrInvalidOptions)
	case opts.DeadLetterQueueURL == "":
		return sum, fmt.Errorf("%w: no DeadLetterQueueURL", ErrInvalidOptions)
	case opts.Resetter == nil && !opts.DryRun:
		return sum, fmt.Errorf("%w: no Resetter (it must reset the idempotency record, or the decorator would acknowledge the message as dead-lettered)", ErrInvalidOptions)
	case opts.Records == nil && opts.DryRun:
		return sum, fmt.Errorf("%w: no Records (a dry run reads each copy's record to say what a real run would do)", ErrInvalidOptions)
	case opts.TargetQueueURL == "" && len(opts.SourceQueues) == 0:
		return sum, fmt.Errorf("%w: name the source queues messages may go back to (SourceQueues), or a TargetQueueURL", ErrInvalidOptions)
	case opts.Max < 0:
		return sum, fmt.Errorf("%w: negative Max", ErrInvalidOptions)
	}
	reasons := make(map[idemstore.Reason]bool, len(opts.Reasons))
	for _, reason := range opts.Reasons {
		switch {
		case !knownReason(reason):
			return sum, fmt.Errorf("%w: unknown reason %q in Reasons", ErrInvalidOptions, reason)
		case reason == idemstore.ReasonOutcomeUnknown && !opts.IncludeOutcomeUnknown:
			return sum, fmt.Errorf("%w: Reasons names outcome_unknown without IncludeOutcomeUnknown: such copies may have had their effect, and go back only when asked by name", ErrInvalidOptions)
		}
		reasons[reason] = true
	}
	copies := make(map[string]bool, len(opts.CopyIDs))
	for _, id := range opts.CopyIDs {
		copies[id] = true
	}
	for name, u := range map[string]string{"DeadLetterQueueURL": opts.DeadLetterQueueURL, "TargetQueueURL": opts.TargetQueueURL} {
		if u == "" {
			continue
		}
		if err := CheckQueueURL(u); err != nil {
			return sum, fmt.Errorf("%w: %s: %w", ErrInvalidOptions, name, err)
		}
	}
	allowed := make(map[string]bool, len(opts.SourceQueues))
	for _, arn := range opts.SourceQueues {
		if _, err := ParseARN(arn); err != nil {
			return sum, fmt.Errorf("%w: source queue: %w", ErrInvalidOptions, err)
		}
		allowed[arn] = true
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Records == nil {
		opts.Records, _ = opts.Resetter.(RecordReader)
	}
	r := &redriver{
		opts:     opts,
		allowed:  allowed,
		reasons:  reasons,
		copies:   copies,
		resolver: newResolver(opts.Client, "", opts.QueueURLs, opts.QueueURLFunc),
		seen:     make(map[string]bool),
		sent:     make(map[string]bool),
		sources:  make(map[string]bool),
		keys:     make(map[string]bool),
	}
	err := r.run(ctx, &sum)
	// Messages left behind come back now rather than when the receive's
	// visibility timeout ends, so an operator can look at them at once.
	r.release()
	return sum, err
}

type redriver struct {
	opts    RedriveOptions
	allowed map[string]bool
	// reasons and copies are RedriveOptions.Reasons and CopyIDs as sets
	// (empty: every one); copies loses each ID once it is handled.
	reasons  map[idemstore.Reason]bool
	copies   map[string]bool
	resolver *resolver
	// seen holds DLQ message IDs received in this run.
	seen map[string]bool
	// sent holds the IDs of the messages this run sent back: a copy whose
	// source message is one of them was dead-lettered again after this
	// run's send.
	sent map[string]bool
	// sources and keys hold the source message IDs and namespace/key pairs
	// this run sent back.
	sources, keys map[string]bool
	// left holds receipt handles of messages that stay in the DLQ.
	left []string
}

func (r *redriver) run(ctx context.Context, sum *RedriveSummary) error {
	vis := r.opts.VisibilityTimeout
	if vis == 0 {
		vis = DefaultRedriveVisibility
	}
	wait := receiveWait(r.opts.WaitTime)
	handled := 0
	for r.opts.Max == 0 || handled < r.opts.Max {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int32(10)
		if r.opts.Max > 0 {
			n = int32(min(10, r.opts.Max-handled))
		}
		out, err := r.opts.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &r.opts.DeadLetterQueueURL,
			MaxNumberOfMessages:         n,
			VisibilityTimeout:           int32(ClampVisibility(vis) / time.Second),
			WaitTimeSeconds:             int32(min(ClampVisibility(wait), 20*time.Second) / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return wrap(err, "receive from dead-letter queue %s", r.opts.DeadLetterQueueURL)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := deref(m.MessageId)
			if r.seen[id] {
				// Back after its visibility ended (a run longer than
				// VisibilityTimeout): handled already, leave it.
				continue
			}
			r.seen[id] = true
			fresh++
			if len(r.opts.CopyIDs) > 0 && !r.copies[id] {
				// Not one of the copies asked for: left as it is.
				r.left = append(r.left, deref(m.ReceiptHandle))
				continue
			}
			delete(r.copies, id)
			if r.opts.Max > 0 && handled >= r.opts.Max {
				r.left = append(r.left, deref(m.ReceiptHandle))
				continue
			}
			handled++
			ev := r.one(ctx, m)
			switch ev.Outcome {
			case RedriveMoved, RedriveWouldMove:
				sum.Moved++
			case RedriveAlreadyDone, RedriveWouldDeleteDone:
				sum.Done++
			case RedriveFailed:
				sum.Failed++
			case RedriveSkipped:
				sum.Skipped++
			}
			if ev.Outcome != RedriveMoved && ev.Outcome != RedriveAlreadyDone {
				r.left = append(r.left, deref(m.ReceiptHandle))
			}
			if r.opts.Progress != nil {
				r.opts.Progress(ev)
			}
		}
		if fresh == 0 || len(r.opts.CopyIDs) > 0 && len(r.copies) == 0 {
			return nil
		}
	}
	return nil
}

// one handles one copy: check, reset, send, delete.
func (r *redriver) one(ctx context.Context, m types.Message) RedriveEvent {
	ev := RedriveEvent{DeadLetterMessageID: deref(m.MessageId)}
	stop := func(step string, outcome RedriveOutcome, err error) RedriveEvent {
		ev.Step, ev.Outcome, ev.Err = step, outcome, err
		return ev
	}
	dm, err := Parse(m)
	if err != nil {
		return stop(StepParse, RedriveSkipped, err)
	}
	md := dm.Metadata
	ev.Metadata = md
	if err := r.check(md); err != nil {
		return stop(StepCheck, RedriveSkipped, err)
	}
	target := r.opts.TargetQueueURL
	if target == "" {
		if target, err = r.resolver.queueURL(ctx, md.SourceARN); err != nil {
			return stop(StepTarget, RedriveFailed, err)
		}
	}
	ev.TargetQueueURL = target

	if md.Key != "" {
		var v verdict
		if md.Reason == idemstore.ReasonOutcomeUnknown && !r.opts.IncludeOutcomeUnknown {
			v, ev.Record, ev.Step, err = r.uncertain(ctx, md, ev.DeadLetterMessageID)
		} else {
			v, ev.Record, ev.Step, err = r.decide(ctx, md, ev.DeadLetterMessageID)
		}
		switch {
		case v == fail:
			return stop(ev.Step, RedriveFailed, err)
		case v == skip:
			return stop(ev.Step, RedriveSkipped, err)
		case v == done && r.opts.DryRun:
			ev.Outcome = RedriveWouldDeleteDone
			return ev
		case v == done:
			if err := r.delete(ctx, m); err != nil {
				return stop(StepDelete, RedriveFailed, err)
			}
			ev.Outcome = RedriveAlreadyDone
			return ev
		}
	}
	if r.opts.DryRun {
		// A real run would handle neither this message nor this key again.
		r.handled(md, "")
		ev.Outcome = RedriveWouldMove
		return ev
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          &target,
		MessageBody:       &dm.Body,
		MessageAttributes: dm.Attributes,
	}
	if isFIFO(target) {
		group := md.GroupID
		if group == "" {
			group = md.MessageID
		}
		in.MessageGroupId = &group
		// New, so the source queue does not drop it as a duplicate of the
		// original; stable per DLQ message, so a redrive repeated after a
		// failed delete is dropped within SQS's five-minute window.
		in.MessageDeduplicationId = ptr(DeduplicationID("redrive", ev.DeadLetterMessageID))
	}
	out, err := r.opts.Client.SendMessage(ctx, in)
	if err != nil {
		return stop(StepSend, RedriveFailed, wrap(err, "send message %s to %s", ev.DeadLetterMessageID, target))
	}
	ev.NewMessageID = deref(out.MessageId)
	// Sent: this run handles neither this message nor this key again.
	r.handled(md, ev.NewMessageID)

	if err := r.delete(ctx, m); err != nil {
		return stop(StepDelete, RedriveFailed, err)
	}
	ev.Outcome = RedriveMoved
	return ev
}

// verdict is what becomes of a copy once its record has been looked at.
type verdict int

const (
	send verdict = iota // send it back (the reset applied, or Resend)
	done                // delete it: the work is done
	skip                // leave it in the DLQ, for the reason given
	fail                // leave it: the store could not answer
)

// decide resets the copy's record (in a DryRun: reads it and judges
// whether the reset would apply) and says what becomes of the copy, with
// the reason when it is skipped or failed. It returns the record the reset
// wrote or refused (or the dry run read), and the step that decided.
func (r *redriver) decide(ctx context.Context, md Metadata, copyID string) (v verdict, rec idemstore.Record, step string, err error) {
	req := idemstore.ResetRequest{
		Namespace: md.Namespace, Key: md.Key, DeadLetterMessageID: copyID,
		Now: r.opts.Now(), MaxRedrives: r.opts.MaxRedrives,
	}
	if r.opts.DryRun {
		step = StepCheck
		rec, err = r.opts.Records.Get(ctx, idemstore.GetRequest{Namespace: md.Namespace, Key: md.Key, Now: req.Now})
		if why := idemstore.ResetRefusal(rec, req); err == nil && why != "" {
			err = fmt.Errorf("%w: %s", idemstore.ErrResetRefused, why)
		}
	} else {
		step = StepReset
		rec, err = r.opts.Resetter.ResetDeadLetter(ctx, req)
	}
	key := md.Namespace + "/" + md.Key
	switch {
	case err == nil:
		return send, rec, step, nil
	case errors.Is(err, idemstore.ErrNotFound):
		return skip, idemstore.Record{}, step, fmt.Errorf("%w: %s has no record (expired, forgotten, or another table): nothing shows that this copy was dead-lettered, or whether its payload ran", ErrNotRedrivable, key)
	case !errors.Is(err, idemstore.ErrResetRefused):
		return fail, rec, step, fmt.Errorf("sqsqueue: reset %s: %w", key, err)
	case rec.Status == idemstore.StatusCompleted:
		if workDone(md, rec, copyID) {
			return done, rec, step, nil
		}
		if md.PayloadHash == "" {
			return skip, rec, step, fmt.Errorf("%w: %s completed (payload hash %s), the copy carries no payload hash and the record was not redriven from it: nothing shows this copy's payload ran", ErrOtherCompletion, key, rec.PayloadHash)
		}
		return skip, rec, step, fmt.Errorf("%w: %s completed with payload hash %s, this copy's is %s: its payload never ran under this key (sent back, it would be dead-lettered as a key conflict)", ErrOtherCompletion, key, rec.PayloadHash, md.PayloadHash)
	case rec.RedrivenFrom == copyID && rec.Status != idemstore.StatusDeadLettered:
		if r.opts.Resend {
			return send, rec, step, nil
		}
		return skip, rec, step, fmt.Errorf("%w (record %s, redriven %d times); it is deleted as done once the message sent back completes the key (never, when the key was the message ID or deduplication ID: the message ran under a new key; delete this copy by hand once it ran)", ErrSentBefore, rec.Status, rec.Redrives)
	case rec.Abandoned() && rec.DeadLetterMessageID == copyID:
		return skip, rec, step, fmt.Errorf("%w: %s (%s)", ErrAbandoned, key, rec.ResolutionNote)
	case rec.Status == idemstore.StatusDeadLettered && rec.DeadLetterMessageID == copyID:
		return skip, rec, step, fmt.Errorf("%w: %s was redriven %d times", ErrRedriveLimit, key, rec.Redrives)
	case rec.Status == idemstore.StatusDeadLettered:
		return skip, rec, step, fmt.Errorf("%w: %s was dead-lettered by copy %s: redrive that one; once it completes with this copy's payload, this copy is deleted as done", ErrNotRedrivable, key, rec.DeadLetterMessageID)
	case pendingFor(md, rec):
		return r.finishMark(ctx, rec, copyID, req.Now)
	case rec.Status == idemstore.StatusInProgress && rec.DeadLetterReason != "":
		return skip, rec, step, fmt.Errorf("%w: %s is being dead-lettered (%s) under a lease this copy was not sent under: the next delivery of its source message finishes it, and this copy is then a spare, deleted as done once the key completes with its payload", ErrNotRedrivable, key, rec.DeadLetterReason)
	default:
		return skip, rec, step, fmt.Errorf("%w: %w", ErrNotRedrivable, err)
	}
}

// uncertain decides on an outcome_unknown copy the run was not asked to
// send back: it reads the copy's record and deletes the copy as done
// when the record shows the work done (resolved as applied, or completed
// with the copy's payload); any other copy stays, with the record's
// state in the reason. It never writes the record.
func (r *redriver) uncertain(ctx context.Context, md Metadata, copyID string) (verdict, idemstore.Record, string, error) {
	key := md.Namespace + "/" + md.Key
	how := "find out whether its effect happened, then resolve the record (lambdaidem resolve; sqsqueue.Resolve), or send it back with redrive -include-outcome-unknown (RedriveOptions.IncludeOutcomeUnknown)"
	if mutant.On("redrive-sends-outcome-unknown") {
		// The bug: outcome_unknown copies go back like any other.
		return r.decide(ctx, md, copyID)
	}
	if r.opts.Records == nil {
		return skip, idemstore.Record{}, StepCheck, fmt.Errorf("%w: %s: %s", ErrUncertain, key, how)
	}
	rec, err := r.opts.Records.Get(ctx, idemstore.GetRequest{Namespace: md.Namespace, Key: md.Key, Now: r.opts.Now()})
	switch {
	case errors.Is(err, idemstore.ErrNotFound):
		return skip, idemstore.Record{}, StepCheck, fmt.Errorf("%w: %s has no record (expired, forgotten, or another table)", ErrUncertain, key)
	case err != nil:
		return fail, idemstore.Record{}, StepCheck, fmt.Errorf("sqsqueue: read %s: %w", key, err)
	case rec.Status == idemstore.StatusCompleted && workDone(md, rec, copyID):
		return done, rec, StepCheck, nil
	case rec.Resolution == idemstore.ResolutionNotApplied && rec.RedrivenFrom == copyID:
		// An operator found that its effect did not happen, and the
		// record was reset for this very copy: it is redriven as any
		// other (the send of that decision failed: ErrSentBefore, or
		// with Resend sent again).
		return r.decide(ctx, md, copyID)
	case rec.Abandoned() && rec.DeadLetterMessageID == copyID:
		return skip, rec, StepCheck, fmt.Errorf("%w: %s (%s)", ErrAbandoned, key, rec.ResolutionNote)
	case rec.Uncertain() && rec.DeadLetterMessageID == copyID:
		return skip, rec, StepCheck, fmt.Errorf("%w: %s is DEAD_LETTERED by this copy, awaiting a decision: %s", ErrUncertain, key, how)
	}
	return skip, rec, StepCheck, fmt.Errorf("%w: %s is %s: %s", ErrUncertain, key, rec.Status, how)
}

// knownReason reports whether reason is one the decorator dead-letters
// with.
func knownReason(reason idemstore.Reason) bool {
	switch reason {
	case idemstore.ReasonMaxAttempts, idemstore.ReasonPoison, idemstore.ReasonKeyConflict, idemstore.ReasonKeyDeadLettered,
		idemstore.ReasonOutcomeUnknown, idemstore.ReasonMissingKey, idemstore.ReasonMalformedBody:
		return true
	}
	return false
}

// pendingFor reports whether rec is still IN_PROGRESS with a pending
// dead-letter mark written under the very lease the copy was sent under:
// its holder sent this copy and then could not write the final mark. The
// lease proof is a digest of the token only the holder and the store know,
// so a copy written by hand cannot match it.
func pendingFor(md Metadata, rec idemstore.Record) bool {
	return rec.Status == idemstore.StatusInProgress && rec.DeadLetterReason != "" &&
		md.LeaseProof != "" && md.LeaseProof == lambdaidem.LeaseProof(rec.LeaseToken)
}

// finishMark writes, for a copy whose record holds only its own pending
// mark (pendingFor), the final dead-letter mark its holder could not: one
// write fenced by that holder's lease token, so it applies only while
// nobody took the key over, exactly as the holder's own would have. The
// copy stays for the next run (ErrMarkFinished). A DryRun only says so.
func (r *redriver) finishMark(ctx context.Context, rec idemstore.Record, copyID string, now time.Time) (verdict, idemstore.Record, string, error) {
	key := rec.Namespace + "/" + rec.Key
	if r.opts.DryRun {
		return skip, rec, StepCheck, fmt.Errorf("%w: a real run marks %s dead-lettered (%s) by this copy", ErrMarkFinished, key, rec.DeadLetterReason)
	}
	m := r.opts.Marker
	if m == nil {
		m, _ = r.opts.Resetter.(DeadLetterMarker)
	}
	if m == nil {
		return skip, rec, StepMark, fmt.Errorf("%w: %s holds only this copy's pending dead-letter mark, and no Marker was given to write the final one", ErrNotRedrivable, key)
	}
	err := m.DeadLetter(ctx, idemstore.DeadLetterRequest{
		Lease: rec.Lease(),
		Now:   now, Reason: rec.DeadLetterReason, Error: rec.LastError,
		MessageID: rec.DeadLetteredMessageID, DeadLetterMessageID: copyID, ExpiresAt: rec.ExpiresAt,
	})
	switch {
	case err == nil:
		rec.Status, rec.DeadLetterMessageID = idemstore.StatusDeadLettered, copyID
		return skip, rec, StepMark, fmt.Errorf("%w: %s is now dead-lettered (%s) by this copy", ErrMarkFinished, key, rec.DeadLetterReason)
	case errors.Is(err, idemstore.ErrLeaseLost):
		return skip, rec, StepMark, fmt.Errorf("%w: %s changed while its pending dead-letter mark was finished (taken over, marked or forgotten): %w", ErrNotRedrivable, key, err)
	default:
		return fail, rec, StepMark, fmt.Errorf("sqsqueue: mark %s dead-lettered by this copy: %w", key, err)
	}
}

// workDone reports whether the COMPLETED record rec shows that the copy's
// payload ran: the record was reset for this very copy and completed in
// the same generation (a claim of a FAILED record requires the payload
// hash it was dead-lettered with), or it completed with the payload hash
// the copy carries. Anything else may be another payload's completion of a
// later generation of the key (after an expiry or a forget), and deleting
// the copy would lose work that never ran.
func workDone(md Metadata, rec idemstore.Record, copyID string) bool {
	if mutant.On("redrive-deletes-unrun-copy") {
		return true // the bug this guards against: any completion of the key counts
	}
	return rec.RedrivenFrom == copyID || (md.PayloadHash != "" && md.PayloadHash == rec.PayloadHash)
}

// check decides, from the metadata alone, whether a copy may be redriven
// in this run.
func (r *redriver) check(md Metadata) error {
	switch {
	case len(r.allowed) > 0 && !r.allowed[md.SourceARN]:
		return fmt.Errorf("%w: %q", ErrSourceNotAllowed, md.SourceARN)
	case len(r.reasons) > 0 && !r.reasons[md.Reason]:
		return fmt.Errorf("%w (%s)", ErrReasonNotSelected, md.Reason)
	case md.Reason == idemstore.ReasonKeyConflict:
		return fmt.Errorf("%w: %s/%s; decide by hand, or send the body again under a key of its own", ErrConflictCopy, md.Namespace, md.Key)
	case md.Key == "" && !r.opts.Keyless:
		return fmt.Errorf("%w (reason %s): send it back with redrive -keyless (RedriveOptions.Keyless)", ErrNoKey, md.Reason)
	case mutant.On("redrive-resends-its-own-copies"):
		// The bug: a run sends back every copy it meets, the new copies of
		// messages it sent back included, and never ends.
		return nil
	case r.sent[md.MessageID]:
		return fmt.Errorf("%w: this run sent message %s back and it was dead-lettered again", ErrHandledThisRun, md.MessageID)
	case md.MessageID != "" && r.sources[md.MessageID]:
		return fmt.Errorf("%w: another copy of message %s was sent back", ErrHandledThisRun, md.MessageID)
	case md.Key != "" && r.keys[runKey(md)]:
		return fmt.Errorf("%w: another copy of key %s/%s was sent back", ErrHandledThisRun, md.Namespace, md.Key)
	}
	return nil
}

// handled notes that this run sent back (in a DryRun: would have sent
// back) the copy of md, as message newID.
func (r *redriver) handled(md Metadata, newID string) {
	if newID != "" {
		r.sent[newID] = true
	}
	if md.MessageID != "" {
		r.sources[md.MessageID] = true
	}
	if md.Key != "" {
		r.keys[runKey(md)] = true
	}
}

// runKey identifies a copy's idempotency record within a run.
func runKey(md Metadata) string { return md.Namespace + "\x00" + md.Key }

func (r *redriver) delete(ctx context.Context, m types.Message) error {
	if _, err := r.opts.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl:      &r.opts.DeadLetterQueueURL,
		ReceiptHandle: m.ReceiptHandle,
	}); err != nil {
		return wrap(err, "delete message %s from %s", deref(m.MessageId), r.opts.DeadLetterQueueURL)
	}
	return nil
}

// release makes the messages left in the DLQ visible again. Best effort:
// a handle that expired belongs to a message that is visible already. It
// uses a fresh context so a cancelled run still releases what it held.
func (r *redriver) release() {
	release(r.opts.Client, r.opts.DeadLetterQueueURL, r.left)
}

// receiveWait is the long-poll wait of a receive for an options'
// WaitTime: DefaultRedriveWait for zero, short polling (0) for a negative
// value.
func receiveWait(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultRedriveWait
	case d < 0:
		return 0
	}
	return d
}
