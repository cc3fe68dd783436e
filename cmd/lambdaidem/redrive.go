package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type redriveFlags struct {
	dlq, to, sqsEndpoint string
	max                  int
	dryRun, quiet        bool
	wait, visibility     time.Duration
}

// redriveJSON is redrive's -json output.
type redriveJSON struct {
	DryRun   bool                 `json:"dry_run"`
	DLQ      string               `json:"dlq"`
	Moved    int                  `json:"moved"`
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
}

func redriveCmd() *command {
	rf := &redriveFlags{}
	return &command{
		name: "redrive",
		summary: `Move messages from the dead-letter queue back to their source queue (from the
copy's metadata) or to -to. For each message, in this order: forget its
idempotency record (refused while a valid lease holds the key: that message
stays in the DLQ), send the original body and attributes, delete it from the
DLQ. A failed step leaves that message in the DLQ and the run goes on. Messages
without lambdaidem metadata (moved by SQS's own redrive policy) are skipped.
One progress line per message goes to stderr. Exit code 1 if any message failed.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&rf.dlq, "dlq", "", "dead-letter queue `URL` to drain (env LAMBDAIDEM_DLQ_URL)")
			fs.StringVar(&rf.to, "to", "", "send every message to this queue `URL` instead of its source queue")
			fs.IntVar(&rf.max, "max", 0, "handle at most `n` messages (0: until the DLQ has none left that this run has not seen)")
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
	}
	client, err := a.sqsClient(ctx, c, rf.sqsEndpoint)
	if err != nil {
		return err
	}
	opts := sqsqueue.RedriveOptions{
		Client:             client,
		DeadLetterQueueURL: rf.dlq,
		TargetQueueURL:     rf.to,
		Max:                rf.max,
		DryRun:             rf.dryRun,
		VisibilityTimeout:  rf.visibility,
		WaitTime:           rf.wait,
		Endpoint:           rf.sqsEndpoint,
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
		opts.Reset = func(ctx context.Context, namespace, key string) error {
			// Forget, not Delete: deleting a key under a valid lease would
			// let the redriven copy run beside the holder.
			_, err := st.Forget(ctx, dynamo.ForgetRequest{Namespace: namespace, Key: key, Now: a.now()})
			if errors.Is(err, lambdaidem.ErrNotFound) {
				return nil
			}
			return err
		}
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
	out.Moved, out.Failed, out.Skipped = sum.Moved, sum.Failed, sum.Skipped
	if c.json {
		a.writeJSON(out)
	} else {
		verb := "moved"
		if rf.dryRun {
			verb = "would move"
		}
		fmt.Fprintf(a.stdout, "%s %d, failed %d, skipped %d (dead-letter queue %s)\n", verb, sum.Moved, sum.Failed, sum.Skipped, rf.dlq)
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
		return fmt.Sprintf("#%d moved %s key %s (%s) -> %s as %s", n, ev.DeadLetterMessageID, key, ev.Metadata.Reason, ev.TargetQueueURL, ev.NewMessageID)
	case sqsqueue.RedriveWouldMove:
		return fmt.Sprintf("#%d would move %s key %s (%s, %s) -> %s", n, ev.DeadLetterMessageID, key, ev.Metadata.Reason, attempts(ev.Metadata.Attempts), ev.TargetQueueURL)
	case sqsqueue.RedriveSkipped:
		return fmt.Sprintf("#%d skipped %s: not a lambdaidem dead-letter copy (%v)", n, ev.DeadLetterMessageID, ev.Err)
	}
	return fmt.Sprintf("#%d FAILED %s key %s at step %s: %v", n, ev.DeadLetterMessageID, key, ev.Step, ev.Err)
}
