package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type redriveFlags struct {
	queueFlags
	to               string
	sources, copies  listFlag
	reasons          reasonList
	max, maxRedrives int
	dryRun, quiet    bool
	resend, keyless  bool
	includeUnknown   bool
}

// reasonList collects -reason values (repeatable, or comma-separated),
// each a reason the decorator dead-letters with.
type reasonList []idemstore.Reason

func (l *reasonList) String() string { return fmt.Sprint([]idemstore.Reason(*l)) }

func (l *reasonList) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		r := idemstore.Reason(strings.ToLower(strings.TrimSpace(s)))
		switch r {
		case "":
		case idemstore.ReasonMaxAttempts, idemstore.ReasonPoison, idemstore.ReasonKeyConflict, idemstore.ReasonKeyDeadLettered,
			idemstore.ReasonOutcomeUnknown, idemstore.ReasonMissingKey, idemstore.ReasonMalformedBody:
			*l = append(*l, r)
		default:
			return fmt.Errorf("unknown reason %q (%s)", s, allReasons)
		}
	}
	return nil
}

// allReasons names the reasons -reason takes.
const allReasons = "max_attempts, poison, key_conflict, key_already_dead_lettered, outcome_unknown, missing_key, malformed_body"

// listFlag is a flag that may be given several times, each value a
// comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// redriveJSON is redrive's -json output.
type redriveJSON struct {
	DryRun  bool   `json:"dry_run"`
	DLQ     string `json:"dlq"`
	Moved   int    `json:"moved"`
	Done    int    `json:"already_done"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	// Uncertain counts the skipped messages dead-lettered as
	// outcome_unknown that the run was not asked to send back.
	Uncertain int                  `json:"outcome_unknown_left"`
	Messages  []redriveMessageJSON `json:"messages"`
}

type redriveMessageJSON struct {
	DLQMessageID string `json:"dlq_message_id"`
	Outcome      string `json:"outcome"`
	Step         string `json:"step,omitempty"`
	Error        string `json:"error,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	Key          string `json:"key,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Attempts     int    `json:"attempts,omitempty"`
	SourceARN    string `json:"source_arn,omitempty"`
	Target       string `json:"target,omitempty"`
	NewMessageID string `json:"new_message_id,omitempty"`
	Redrives     int    `json:"redrives,omitempty"`
}

func redriveCmd() *command {
	rf := &redriveFlags{}
	return &command{
		name: "redrive",
		summary: `Move messages from the dead-letter queue back to their source queue
(which must be one of the -source queues) or to -to, so the function runs them
again, without ever running work twice or deleting work that never ran. For
each message: reset its idempotency record, which applies only when the record
is DEAD_LETTERED by this very copy; send the original body and attributes;
delete it from the DLQ. A message whose key has COMPLETED with this copy's
payload since (the message sent back from this copy completed it, or one with
the same payload hash did) is deleted without being sent: the work is done.
Every other message stays in the DLQ with the reason: not a lambdaidem copy
(e.g. moved by SQS's own redrive policy), a source queue not named with
-source, a key conflict (the record belongs to another message), no key, a
record the function still holds or retries, dead-lettered by another copy, no
record at all (expired, or forgotten: see "forget"), a key completed with
another payload, or sent back by an earlier run. Each message and key is sent
at most once per run. One progress line per message goes to stderr. Exit code
1 if any step failed.

Messages dead-lettered as outcome_unknown stay in the DLQ unless
-include-outcome-unknown asks for them by name: their at-most-once attempt
ended without a recorded outcome (a crash, a timeout, a panic, a return after
its context ended), so their effect (an email, a payment, a message to the
next queue) may have happened, and sending them back may repeat it. Find out
whether it did, then decide with "lambdaidem resolve KEY"; a message whose
record was resolved as applied is deleted as done, one abandoned stays for
good. -reason picks messages by reason, -copy by DLQ message ID ("lambdaidem
dlq" lists both).

-dry-run reads each message's record and says, for each, what a real run would
do as the record stands (move it, delete it as done, or skip it and why), and
changes nothing; a record that changes before the real run changes what the
real run does.

Key modes: with keys from the body or a message attribute, the redriven message
keeps its key, so a repeated send is acknowledged as a duplicate. With the
default message-ID keys (and FIFO deduplication-ID keys) it gets a new key:
only this command's reset stands between a repeated send and a second run, so
never pass -resend for them. SQS's own redrive (console "Start DLQ redrive",
StartMessageMoveTask) gives messages new IDs and resets nothing: safe only with
body or attribute keys, and then only after the record is reset or forgotten.
See docs/redrive.md.`,
		flags: func(fs *flag.FlagSet) {
			rf.add(fs, "dead-letter queue `URL` to drain", sqsqueue.DefaultRedriveVisibility, "how long a received message stays hidden while it is moved")
			fs.Var(&rf.sources, "source", "`ARN` of a source queue messages may go back to (repeat, or comma-separate); a message from any other queue is skipped. Required unless -to")
			fs.StringVar(&rf.to, "to", "", "send every message to this queue `URL` instead of its source queue")
			fs.IntVar(&rf.max, "max", 0, "handle at most `n` messages (0: until the DLQ has none left that this run has not seen)")
			fs.IntVar(&rf.maxRedrives, "max-redrives", 0, "leave a message whose key was redriven `n` times already (0: no limit)")
			fs.BoolVar(&rf.resend, "resend", false, "send again a message an earlier run reset but could not finish (safe only with body or attribute keys)")
			fs.BoolVar(&rf.keyless, "keyless", false, "also send back messages dead-lettered without a key (missing_key, malformed_body); nothing vouches for such a copy")
			fs.BoolVar(&rf.includeUnknown, "include-outcome-unknown", false, "also send back messages dead-lettered as outcome_unknown, whose effect may have happened: only once you found that it did not (\"resolve\" decides one key at a time)")
			fs.Var(&rf.reasons, "reason", "only messages dead-lettered for these `reasons` (repeatable or comma-separated: "+allReasons+"); outcome_unknown needs -include-outcome-unknown too")
			fs.Var(&rf.copies, "copy", "only the DLQ message with this `ID` (repeatable or comma-separated; \"lambdaidem dlq\" lists them)")
			fs.BoolVar(&rf.dryRun, "dry-run", false, "say what a real run would do with each message, reading its record; change nothing (receiving raises the messages' receive counts)")
			fs.BoolVar(&rf.quiet, "quiet", false, "no progress lines on stderr")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			return a.redrive(ctx, c, rf, args)
		},
	}
}

func (a *app) redrive(ctx context.Context, c *common, rf *redriveFlags, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if err := rf.fromEnv(a, true); err != nil {
		return err
	}
	switch {
	case rf.max < 0:
		return usagef("-max must not be negative")
	case rf.maxRedrives < 0:
		return usagef("-max-redrives must not be negative")
	case rf.to == "" && len(rf.sources) == 0:
		return usagef("name the source queues messages may go back to (-source ARN), or a target queue (-to URL)")
	case slices.Contains(rf.reasons, idemstore.ReasonOutcomeUnknown) && !rf.includeUnknown:
		return usagef("-reason outcome_unknown sends back messages whose effect may have happened: pass -include-outcome-unknown too, once you found that it did not (or decide one key at a time with \"lambdaidem resolve\")")
	}
	for _, arn := range rf.sources {
		if _, err := sqsqueue.ParseARN(arn); err != nil {
			return usagef("-source: %v", err)
		}
	}
	client, err := a.sqsClient(ctx, c, rf.sqsEndpoint)
	if err != nil {
		return err
	}
	opts := sqsqueue.RedriveOptions{
		Client:                client,
		DeadLetterQueueURL:    rf.dlq,
		TargetQueueURL:        rf.to,
		SourceQueues:          rf.sources,
		Max:                   rf.max,
		MaxRedrives:           rf.maxRedrives,
		Resend:                rf.resend,
		Keyless:               rf.keyless,
		IncludeOutcomeUnknown: rf.includeUnknown,
		Reasons:               rf.reasons,
		CopyIDs:               rf.copies,
		DryRun:                rf.dryRun,
		VisibilityTimeout:     rf.visibility,
		WaitTime:              rf.waitTime(),
		Now:                   a.now,
	}
	st, err := a.admin(ctx, c)
	if err != nil {
		return err
	}
	// The store's conditional reset, never a delete: it applies only to a
	// record this very copy dead-lettered. A dry run only reads records.
	opts.Resetter, opts.Records = st, st
	out := redriveJSON{DryRun: rf.dryRun, DLQ: rf.dlq, Messages: []redriveMessageJSON{}}
	n := 0
	opts.Progress = func(ev sqsqueue.RedriveEvent) {
		n++
		m := redriveMessageJSON{
			DLQMessageID: ev.DeadLetterMessageID, Outcome: string(ev.Outcome), Step: ev.Step,
			Namespace: ev.Metadata.Namespace, Key: ev.Metadata.Key, Reason: string(ev.Metadata.Reason),
			Attempts: ev.Metadata.Attempts, SourceARN: ev.Metadata.SourceARN,
			Target: ev.TargetQueueURL, NewMessageID: ev.NewMessageID,
			Redrives: ev.Record.Redrives,
		}
		if ev.Err != nil {
			m.Error = ev.Err.Error()
		}
		if errors.Is(ev.Err, sqsqueue.ErrUncertain) {
			out.Uncertain++
		}
		out.Messages = append(out.Messages, m)
		if !rf.quiet {
			a.progressf("redrive: %s", describeRedrive(n, ev, rf.dryRun))
		}
	}
	sum, err := sqsqueue.Redrive(ctx, opts)
	out.Moved, out.Done, out.Failed, out.Skipped = sum.Moved, sum.Done, sum.Failed, sum.Skipped
	switch {
	case c.json:
		a.writeJSON(out)
	case rf.dryRun:
		fmt.Fprintf(a.stdout, "dry run: would move %d, would delete as done %d, would skip %d, failed to check %d (dead-letter queue %s, as the records stand now)\n", sum.Moved, sum.Done, sum.Skipped, sum.Failed, rf.dlq)
	default:
		fmt.Fprintf(a.stdout, "moved %d, deleted as done %d, skipped %d, failed %d (dead-letter queue %s)\n", sum.Moved, sum.Done, sum.Skipped, sum.Failed, rf.dlq)
	}
	if out.Uncertain > 0 && !c.json {
		fmt.Fprintf(a.stdout, "%d of the skipped were dead-lettered as outcome_unknown and stay in the DLQ: their effect may have happened. Find out whether it did for each, then \"lambdaidem resolve KEY -applied|-not-applied|-abandon\" (docs/operations.md); -include-outcome-unknown sends them back as they are\n", out.Uncertain)
	}
	if err != nil {
		return fmt.Errorf("redrive from %s stopped: %w", rf.dlq, err)
	}
	if sum.Failed > 0 {
		return fmt.Errorf("%d messages could not be moved and stay in %s (see the lines above)", sum.Failed, rf.dlq)
	}
	return nil
}

// describeRedrive is the progress line of one message: what happened to
// it (in a dry run, what would), and why.
func describeRedrive(n int, ev sqsqueue.RedriveEvent, dry bool) string {
	key := safe(ev.Metadata.Namespace + "/" + ev.Metadata.Key)
	id := safe(ev.DeadLetterMessageID)
	switch ev.Outcome {
	case sqsqueue.RedriveMoved:
		note := ""
		if ev.Metadata.Key != "" && ev.Metadata.Key == ev.Metadata.MessageID {
			note = "; message-ID key: it runs under its new ID " + safe(ev.NewMessageID)
		}
		return fmt.Sprintf("#%d moved %s key %s (%s) -> %s as %s (redrive %d%s)", n, id, key, safe(string(ev.Metadata.Reason)), safe(ev.TargetQueueURL), safe(ev.NewMessageID), ev.Record.Redrives, note)
	case sqsqueue.RedriveWouldMove:
		return fmt.Sprintf("#%d would move %s key %s (%s, %s) -> %s", n, id, key, safe(string(ev.Metadata.Reason)), attempts(ev.Metadata.Attempts), safe(ev.TargetQueueURL))
	case sqsqueue.RedriveAlreadyDone:
		return fmt.Sprintf("#%d deleted %s key %s without sending it: %s", n, id, key, doneBy(ev))
	case sqsqueue.RedriveWouldDeleteDone:
		return fmt.Sprintf("#%d would delete %s key %s without sending it: %s", n, id, key, doneBy(ev))
	case sqsqueue.RedriveSkipped:
		verb := "skipped"
		if dry {
			verb = "would skip"
		}
		if ev.Step == sqsqueue.StepParse {
			return fmt.Sprintf("#%d %s %s: not a lambdaidem dead-letter copy (%s)", n, verb, id, safe(ev.Err.Error()))
		}
		return fmt.Sprintf("#%d %s %s key %s, left in the DLQ: %s", n, verb, id, key, safe(ev.Err.Error()))
	}
	return fmt.Sprintf("#%d FAILED %s key %s at step %s: %s", n, id, key, ev.Step, safe(fmt.Sprint(ev.Err)))
}

// doneBy says how the record shows a copy's work done.
func doneBy(ev sqsqueue.RedriveEvent) string {
	if ev.Record.RedrivenFrom == ev.DeadLetterMessageID {
		return "the key has COMPLETED since this copy was sent back: the work is done"
	}
	return "the key has COMPLETED with this copy's payload (hash " + safe(ev.Record.PayloadHash) + "): the work is done"
}
