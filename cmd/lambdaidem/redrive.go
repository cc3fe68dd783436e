package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type redriveFlags struct {
	dlq, to, sqsEndpoint string
	sources              listFlag
	max, maxRedrives     int
	dryRun, quiet        bool
	resend, keyless      bool
	wait, visibility     time.Duration
}

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
	DryRun   bool                 `json:"dry_run"`
	DLQ      string               `json:"dlq"`
	Moved    int                  `json:"moved"`
	Done     int                  `json:"already_done"`
	Failed   int                  `json:"failed"`
	Skipped  int                  `json:"skipped"`
	Messages []redriveMessageJSON `json:"messages"`
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
again, without ever running work twice. For each message: reset its
idempotency record, which applies only when the record is DEAD_LETTERED by
this very copy; send the original body and attributes; delete it from the DLQ.
A message whose key has COMPLETED since is deleted without being sent (the work
is done). Every other message stays in the DLQ with the reason: not a lambdaidem
copy (e.g. moved by SQS's own redrive policy), a source queue not named with
-source, a key conflict (the record belongs to another message), no key, a
record the function still holds or retries, dead-lettered by another copy, or
sent back by an earlier run. Each message and key is sent at most once per run.
One progress line per message goes to stderr. Exit code 1 if any step failed.

Key modes: with keys from the body or a message attribute, the redriven message
keeps its key, so a repeated send is acknowledged as a duplicate. With the
default message-ID keys (and FIFO deduplication-ID keys) it gets a new key:
only this command's reset stands between a repeated send and a second run, so
never pass -resend for them. SQS's own redrive (console "Start DLQ redrive",
StartMessageMoveTask) gives messages new IDs and resets nothing: safe only with
body or attribute keys, and then only after the record is reset or forgotten.
See docs/redrive.md.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&rf.dlq, "dlq", "", "dead-letter queue `URL` to drain (env LAMBDAIDEM_DLQ_URL)")
			fs.Var(&rf.sources, "source", "`ARN` of a source queue messages may go back to (repeat, or comma-separate); a message from any other queue is skipped. Required unless -to")
			fs.StringVar(&rf.to, "to", "", "send every message to this queue `URL` instead of its source queue")
			fs.IntVar(&rf.max, "max", 0, "handle at most `n` messages (0: until the DLQ has none left that this run has not seen)")
			fs.IntVar(&rf.maxRedrives, "max-redrives", 0, "leave a message whose key was redriven `n` times already (0: no limit)")
			fs.BoolVar(&rf.resend, "resend", false, "send again a message an earlier run reset but could not finish (safe only with body or attribute keys)")
			fs.BoolVar(&rf.keyless, "keyless", false, "also send back messages dead-lettered without a key (missing_key, malformed_body); nothing vouches for such a copy")
			fs.BoolVar(&rf.dryRun, "dry-run", false, "list what would move; change nothing (receiving raises the messages' receive counts)")
			fs.StringVar(&rf.sqsEndpoint, "sqs-endpoint", "", "SQS endpoint `URL` (env AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL)")
			fs.DurationVar(&rf.wait, "wait", sqsqueue.DefaultRedriveWait, "long-poll wait of each receive (0: short polling)")
			fs.DurationVar(&rf.visibility, "visibility", sqsqueue.DefaultRedriveVisibility, "how long a received message stays hidden while it is moved")
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
	rf.dlq = firstOf(rf.dlq, a.env("LAMBDAIDEM_DLQ_URL"))
	rf.sqsEndpoint = firstOf(rf.sqsEndpoint, a.env("AWS_ENDPOINT_URL_SQS"), a.env("AWS_ENDPOINT_URL"))
	switch {
	case rf.dlq == "":
		return usagef("no dead-letter queue: set -dlq or LAMBDAIDEM_DLQ_URL")
	case rf.max < 0:
		return usagef("-max must not be negative")
	case rf.wait < 0 || rf.visibility < 0:
		return usagef("-wait and -visibility must not be negative")
	case rf.maxRedrives < 0:
		return usagef("-max-redrives must not be negative")
	case rf.to == "" && len(rf.sources) == 0:
		return usagef("name the source queues messages may go back to (-source ARN), or a target queue (-to URL)")
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
		Client:             client,
		DeadLetterQueueURL: rf.dlq,
		TargetQueueURL:     rf.to,
		SourceQueues:       rf.sources,
		Max:                rf.max,
		MaxRedrives:        rf.maxRedrives,
		Resend:             rf.resend,
		Keyless:            rf.keyless,
		DryRun:             rf.dryRun,
		VisibilityTimeout:  rf.visibility,
		WaitTime:           rf.wait,
		Now:                a.now,
	}
	if rf.wait == 0 {
		opts.WaitTime = -1 // Redrive's "short polling"
	}
	if !rf.dryRun {
		// A dry run touches no record, so it needs no table.
		st, err := a.admin(ctx, c, nil)
		if err != nil {
			return err
		}
		// The store's conditional reset, never a delete: it applies only to
		// a record this very copy dead-lettered.
		opts.Resetter = st
	}
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
		out.Messages = append(out.Messages, m)
		if !rf.quiet {
			a.progressf("redrive: %s", describeRedrive(n, ev))
		}
	}
	sum, err := sqsqueue.Redrive(ctx, opts)
	out.Moved, out.Done, out.Failed, out.Skipped = sum.Moved, sum.Done, sum.Failed, sum.Skipped
	if c.json {
		a.writeJSON(out)
	} else {
		verb := "moved"
		if rf.dryRun {
			verb = "would move"
		}
		fmt.Fprintf(a.stdout, "%s %d, already done %d, failed %d, skipped %d (dead-letter queue %s)\n", verb, sum.Moved, sum.Done, sum.Failed, sum.Skipped, rf.dlq)
	}
	if err != nil {
		return fmt.Errorf("redrive from %s stopped: %w", rf.dlq, err)
	}
	if sum.Failed > 0 {
		return fmt.Errorf("%d messages could not be moved and stay in %s (see the lines above)", sum.Failed, rf.dlq)
	}
	return nil
}

func describeRedrive(n int, ev sqsqueue.RedriveEvent) string {
	key := ev.Metadata.Namespace + "/" + ev.Metadata.Key
	switch ev.Outcome {
	case sqsqueue.RedriveMoved:
		note := ""
		if ev.Metadata.Key != "" && ev.Metadata.Key == ev.Metadata.MessageID {
			note = "; message-ID key: it runs under its new ID " + ev.NewMessageID
		}
		return fmt.Sprintf("#%d moved %s key %s (%s) -> %s as %s (redrive %d%s)", n, ev.DeadLetterMessageID, key, ev.Metadata.Reason, ev.TargetQueueURL, ev.NewMessageID, ev.Record.Redrives, note)
	case sqsqueue.RedriveWouldMove:
		return fmt.Sprintf("#%d would move %s key %s (%s, %s) -> %s", n, ev.DeadLetterMessageID, key, ev.Metadata.Reason, attempts(ev.Metadata.Attempts), ev.TargetQueueURL)
	case sqsqueue.RedriveAlreadyDone:
		return fmt.Sprintf("#%d deleted %s key %s without sending: the key has COMPLETED, the work is done", n, ev.DeadLetterMessageID, key)
	case sqsqueue.RedriveSkipped:
		if ev.Step == sqsqueue.StepParse {
			return fmt.Sprintf("#%d skipped %s: not a lambdaidem dead-letter copy (%v)", n, ev.DeadLetterMessageID, ev.Err)
		}
		return fmt.Sprintf("#%d skipped %s key %s, left in the DLQ: %v", n, ev.DeadLetterMessageID, key, ev.Err)
	}
	return fmt.Sprintf("#%d FAILED %s key %s at step %s: %v", n, ev.DeadLetterMessageID, key, ev.Step, ev.Err)
}
