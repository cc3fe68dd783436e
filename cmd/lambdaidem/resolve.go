package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type resolveFlags struct {
	applied, notApplied, abandon bool
	by, note                     string
	queueFlags
	to               string
	sources          listFlag
	functionTimeout  time.Duration
	withoutCopy, yes bool
}

// resolveJSON is resolve's -json output.
type resolveJSON struct {
	Decision string     `json:"decision"`
	Record   recordJSON `json:"record"`
	// Copy is what became of the record's dead-letter copy: deleted
	// (applied), moved (not_applied), kept (abandoned), left (not found,
	// or no -dlq) or none.
	Copy         string `json:"copy"`
	CopyID       string `json:"copy_id,omitempty"`
	NewMessageID string `json:"new_message_id,omitempty"`
}

func resolveCmd() *command {
	rf := &resolveFlags{}
	return &command{
		name: "resolve", args: "KEY",
		summary: `Record what you found about a record whose outcome is unknown: DEAD_LETTERED as
outcome_unknown: its handler returned OutcomeUnknown, or, with WithAtMostOnce,
its attempt ended (a crash, a timeout, a panic, an error not declared
NotApplied) without a recorded outcome, so that its effect may or may not
have happened. Look at the effect's target first
(the payment provider, the mailbox, the next queue), then decide with one of:

  -applied      the effect happened: the record becomes COMPLETED (later
                messages with the key are duplicates; a Wrap call gets
                ErrResultNotStored), and its dead-letter copy is deleted
                (with -dlq; without it, or when the queue does not show it,
                the next redrive deletes it as done)
  -not-applied  it did not: the record is reset as a redrive resets it and its
                copy sent back to its source queue (-dlq with -source, or -to),
                so the key runs once more. A copy the queue does not show
                changes nothing; -without-copy, for a copy gone for good,
                resets the record alone (the key then runs on its next message)
  -abandon      nobody will run it: the record stays DEAD_LETTERED, marked
                abandoned; redrive never sends its copy back, and get, list,
                stats and dlq say so. Final

The decision is kept on the record with -by (who) and -note (why). It applies
only while the record is as you read it (exit 4 if it changed), and not before
-function-timeout after the record was marked: an attempt that lost its lease
may still be running, and have its effect, until its invocation ends. Asks for
confirmation on a terminal; elsewhere -yes is required.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&rf.applied, "applied", false, "the effect happened: complete the key, delete its copy")
			fs.BoolVar(&rf.notApplied, "not-applied", false, "the effect did not happen: send the copy back, so the key runs once more")
			fs.BoolVar(&rf.abandon, "abandon", false, "nobody will run it: keep it, never redriven")
			fs.StringVar(&rf.by, "by", "", "`who` decides (env LAMBDAIDEM_OPERATOR, else USER)")
			fs.StringVar(&rf.note, "note", "", "`why`: what you looked at (kept on the record; required)")
			rf.add(fs, "dead-letter queue `URL` holding the record's copy", sqsqueue.DefaultRedriveVisibility, "how long a received message stays hidden while the copy is looked for")
			fs.Var(&rf.sources, "source", "`ARN` of the source queue the copy may go back to (-not-applied; repeatable)")
			fs.StringVar(&rf.to, "to", "", "send the copy to this queue `URL` instead of its source queue (-not-applied)")
			fs.BoolVar(&rf.withoutCopy, "without-copy", false, "-not-applied for a copy gone from the queue for good: reset the record alone")
			fs.DurationVar(&rf.functionTimeout, "function-timeout", sqsqueue.DefaultFunctionTimeout, "the function's timeout: no decision until this long after the record was marked")
			fs.BoolVar(&rf.yes, "yes", false, "do not ask for confirmation")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			return a.resolve(ctx, c, rf, args)
		},
	}
}

func (a *app) resolve(ctx context.Context, c *common, rf *resolveFlags, args []string) error {
	var d idemstore.Resolution
	n := 0
	for set, dec := range map[*bool]idemstore.Resolution{&rf.applied: idemstore.ResolutionApplied, &rf.notApplied: idemstore.ResolutionNotApplied, &rf.abandon: idemstore.ResolutionAbandoned} {
		if *set {
			d = dec
			n++
		}
	}
	rf.by = cmp.Or(rf.by, a.env("LAMBDAIDEM_OPERATOR"), a.env("USER"), a.env("LOGNAME"))
	if err := rf.fromEnv(a, false); err != nil {
		return err
	}
	switch {
	case n != 1:
		return usagef("decide with one of -applied, -not-applied or -abandon")
	case rf.note == "":
		return usagef("say why with -note (what you looked at): it is kept on the record")
	case rf.by == "":
		return usagef("name who decides with -by (or LAMBDAIDEM_OPERATOR)")
	case len(rf.by) > idemstore.MaxResolveByBytes || len(rf.note) > idemstore.MaxResolveNoteBytes:
		return usagef("-by may hold %d bytes and -note %d", idemstore.MaxResolveByBytes, idemstore.MaxResolveNoteBytes)
	case rf.functionTimeout < 0:
		return usagef("-function-timeout must not be negative")
	case rf.withoutCopy && d != idemstore.ResolutionNotApplied:
		return usagef("-without-copy goes with -not-applied")
	}
	for _, arn := range rf.sources {
		if _, err := sqsqueue.ParseARN(arn); err != nil {
			return usagef("-source: %v", err)
		}
	}
	key, st, r, now, err := a.record(ctx, c, args)
	if err != nil {
		return err
	}
	where := c.where(key)
	switch {
	case r.Abandoned():
		return refusef("%s was abandoned already (%s): that decision is final. To let the key run as a new one, forget it (-abandon-copy)", where, safe(r.ResolutionNote))
	case !r.Uncertain():
		reason := ""
		if r.DeadLetterReason != "" {
			reason = " (" + safe(string(r.DeadLetterReason)) + ")"
		}
		return refusef("%s is %s%s: resolve decides on records DEAD_LETTERED as outcome_unknown only (redrive handles the other dead letters; release a stuck lease)", where, r.Status, reason)
	}
	copyID := r.CopyID()
	needQueue := d == idemstore.ResolutionNotApplied && copyID != "" && !rf.withoutCopy
	if needQueue && (rf.dlq == "" || rf.to == "" && len(rf.sources) == 0) {
		return usagef("-not-applied sends copy %s back: give -dlq and -source QUEUE_ARN (or -to URL); -without-copy resets the record alone, for a copy gone for good", safe(copyID))
	}
	if settled := r.UpdatedAt.Add(rf.functionTimeout); now.Before(settled) {
		return refusef("%s was marked %s: its attempt may still be running until %s (-function-timeout %s after that). Decide after that, or pass your function's timeout with -function-timeout",
			where, when(r.UpdatedAt, now), when(settled, now), rf.functionTimeout)
	}
	if !rf.yes {
		ok, err := a.confirm(fmt.Sprintf("Resolve %s (outcome unknown since %s: %s) as %s?", where, when(r.UpdatedAt, now), safe(oneLine(r.LastError, 80)), d))
		if err != nil {
			return err
		}
		if !ok {
			return refusef("not confirmed: %s left as it was", where)
		}
	}
	opts := sqsqueue.ResolveOptions{
		Store: st, Record: r, Decision: d, By: rf.by, Note: rf.note,
		FunctionTimeout: rf.functionTimeout, WithoutCopy: rf.withoutCopy, Now: a.now,
	}
	if rf.dlq != "" && copyID != "" && d != idemstore.ResolutionAbandoned && !rf.withoutCopy {
		client, err := a.sqsClient(ctx, c, rf.sqsEndpoint)
		if err != nil {
			return err
		}
		opts.Queue = sqsqueue.RedriveOptions{
			Client: client, DeadLetterQueueURL: rf.dlq, TargetQueueURL: rf.to, SourceQueues: rf.sources,
			VisibilityTimeout: rf.visibility, WaitTime: rf.waitTime(),
		}
	}
	res, err := sqsqueue.Resolve(ctx, opts)
	out := resolveJSON{Decision: string(d), Record: toJSON(res.Record, now), CopyID: copyID, Copy: copyFate(d, copyID, res)}
	if res.Copy.NewMessageID != "" {
		out.NewMessageID = res.Copy.NewMessageID
	}
	if err != nil {
		if res.Record.Resolution == d && res.Record.LeaseToken != r.LeaseToken {
			// Decided, but the copy's part failed: say what stands.
			fmt.Fprintln(a.stdout, describeResolve(where, out))
		}
		return fmt.Errorf("resolve %s as %s: %w", where, d, err)
	}
	if c.json {
		a.writeJSON(out)
		return nil
	}
	fmt.Fprintln(a.stdout, describeResolve(where, out))
	return nil
}

// copyFate names what became of a record's copy (resolveJSON.Copy).
func copyFate(d idemstore.Resolution, copyID string, res sqsqueue.ResolveResult) string {
	switch {
	case copyID == "":
		return "none"
	case d == idemstore.ResolutionAbandoned:
		return "kept"
	case res.Copy.Outcome == sqsqueue.RedriveAlreadyDone:
		return "deleted"
	case res.Copy.Outcome == sqsqueue.RedriveMoved:
		return "moved"
	}
	return "left"
}

// describeResolve says what a decision did and what happens next.
func describeResolve(where string, out resolveJSON) string {
	id := safe(out.CopyID)
	switch {
	case out.Decision == string(idemstore.ResolutionApplied):
		s := "resolved " + where + " as applied: the record is COMPLETED, so later messages with the key are acknowledged as duplicates (a Wrap call gets ErrResultNotStored)"
		switch out.Copy {
		case "deleted":
			return s + "; its dead-letter copy " + id + " was deleted."
		case "left":
			return s + "; its dead-letter copy " + id + " stays in the DLQ (no -dlq, or the queue did not show it): the next redrive deletes it as done."
		}
		return s + "."
	case out.Decision == string(idemstore.ResolutionNotApplied):
		switch out.Copy {
		case "moved":
			return "resolved " + where + " as not applied: the record is FAILED, reset for copy " + id + ", which went back as message " + safe(out.NewMessageID) + ": the key runs once more."
		case "left":
			return "resolved " + where + " as not applied: the record is FAILED, reset for copy " + id + ", which was not sent back (see the error): send it with lambdaidem redrive -include-outcome-unknown -resend -copy " + id + "."
		}
		return "resolved " + where + " as not applied: the record is FAILED; no message is on its way (the source message was acknowledged), so the key runs on the next message that carries it."
	}
	s := "resolved " + where + " as abandoned: the record stays DEAD_LETTERED, marked abandoned; a later message with the key never runs (it is dead-lettered as key_already_dead_lettered)"
	if out.Copy == "kept" {
		s += ", and no redrive sends its copy " + id + " back: it stays in the DLQ until you delete it or the queue's retention ends"
	}
	return s + "."
}
