package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// dlqNote is what every dlq run says, on stderr and in its JSON: SQS has
// no way to read a message without receiving it.
const dlqNote = "reading a message is receiving it: each message shown had its ApproximateReceiveCount raised by one (on a dead-letter queue with a redrive policy of its own, that counts toward its maxReceiveCount), and was hidden from other consumers until the view ended; every one was made visible again at once (visibility 0); nothing was deleted or sent"

type dlqFlags struct {
	queueFlags
	reasons   reasonList
	max, body int
}

// dlqJSON is dlq's -json output.
type dlqJSON struct {
	DLQ    string        `json:"dlq"`
	Copies []dlqCopyJSON `json:"copies"`
	// More is true when -max stopped the view before the queue ran out.
	More bool `json:"more"`
	// Hidden counts the messages received but left out by -reason.
	Hidden int `json:"hidden"`
	// Unreleased counts the messages that could not be made visible
	// again at once (their visibility timeout ends it instead).
	Unreleased int    `json:"unreleased"`
	Note       string `json:"note"`
}

type dlqCopyJSON struct {
	CopyID string `json:"copy_id"`
	// NotACopy says why the message is not a lambdaidem dead-letter copy
	// (moved by SQS's own redrive policy, or written by hand).
	NotACopy       string `json:"not_a_copy,omitempty"`
	Reason         string `json:"reason,omitempty"`
	Namespace      string `json:"namespace,omitempty"`
	Key            string `json:"key,omitempty"`
	Attempts       int    `json:"attempts,omitempty"`
	SourceARN      string `json:"source_arn,omitempty"`
	MessageID      string `json:"message_id,omitempty"`
	GroupID        string `json:"group_id,omitempty"`
	FirstAttemptAt string `json:"first_attempt_at,omitempty"`
	LastAttemptAt  string `json:"last_attempt_at,omitempty"`
	SentAt         string `json:"sent_at,omitempty"`
	AgeSeconds     int64  `json:"age_seconds"`
	ReceiveCount   int    `json:"receive_count"`
	Error          string `json:"error,omitempty"`
	ErrorTruncated bool   `json:"error_truncated,omitempty"`
	// Body is the body, cut to -body characters (BodyTruncated).
	Body          string `json:"body"`
	BodyBytes     int    `json:"body_bytes"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	// RecordState says what the copy's record shows (with a store):
	// RECORD in the table. Record is the record itself.
	RecordState string      `json:"record_state,omitempty"`
	Record      *recordJSON `json:"record,omitempty"`
}

func dlqCmd() *command {
	df := &dlqFlags{}
	return &command{
		name: "dlq",
		summary: `Show what the dead-letter queue holds, without moving anything: for each message
its ID, age in the queue, reason, key, attempts, receive count, last error and
the start of its body, and, with a store (-table or -store), what its record
shows (DEAD_LETTERED by it, awaiting a decision when its outcome is unknown,
abandoned, COMPLETED...). -json gives every field, the record included.

SQS cannot show a message without receiving it: every message shown has its
ApproximateReceiveCount raised by one (on a DLQ with a redrive policy of its
own, that counts toward its maxReceiveCount) and is hidden from other
consumers, a redrive included, while the view is built (-visibility, 30s);
when it ends, every message is made visible again at once (visibility 0).
Nothing is deleted or sent. Messages in flight with another consumer are not
shown.`,
		flags: func(fs *flag.FlagSet) {
			df.add(fs, "dead-letter queue `URL`", sqsqueue.DefaultBrowseVisibility, "how long each message is hidden while the view is built, at most (it is made visible again when the view ends)")
			fs.IntVar(&df.max, "max", 100, "show at most `n` messages (0: all)")
			fs.Var(&df.reasons, "reason", "only messages dead-lettered for these `reasons` (repeatable or comma-separated: "+allReasons+")")
			fs.IntVar(&df.body, "body", 40, "show the first `n` characters of each body (-1: all of it, 0: none)")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			return a.dlqView(ctx, c, df, args)
		},
	}
}

func (a *app) dlqView(ctx context.Context, c *common, df *dlqFlags, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if err := df.fromEnv(a, true); err != nil {
		return err
	}
	if df.max < 0 || df.body < -1 {
		return usagef("-max must not be negative, -body not below -1")
	}
	if err := sqsqueue.CheckQueueURL(df.dlq); err != nil {
		return usagef("-dlq: %v", err)
	}
	client, err := a.sqsClient(ctx, c, df.sqsEndpoint)
	if err != nil {
		return err
	}
	// A store, when one is named, says what each copy's record shows.
	var st idemstore.Admin
	if c.isRedis() || c.table != "" {
		if st, err = a.admin(ctx, c); err != nil {
			return err
		}
	}
	opts := sqsqueue.BrowseOptions{Client: client, DeadLetterQueueURL: df.dlq, Max: df.max, VisibilityTimeout: df.visibility, WaitTime: df.waitTime()}
	res, err := sqsqueue.Browse(ctx, opts)
	a.progressf("dlq: %s", dlqNote)
	if res.Unreleased > 0 {
		a.progressf("dlq: %d messages could not be made visible again at once: they come back when their %s visibility ends", res.Unreleased, df.visibility)
	}
	if err != nil {
		return fmt.Errorf("view of %s stopped: %w", df.dlq, err)
	}
	now := a.now()
	out := dlqJSON{DLQ: df.dlq, Copies: []dlqCopyJSON{}, More: res.More, Unreleased: res.Unreleased, Note: dlqNote}
	for _, cp := range res.Copies {
		if len(df.reasons) > 0 && !slices.Contains(df.reasons, cp.Metadata.Reason) {
			out.Hidden++
			continue
		}
		j := copyJSON(cp, now, df.body)
		if st != nil && cp.ParseErr == nil && cp.Metadata.Key != "" {
			rec, err := st.Get(ctx, idemstore.GetRequest{Namespace: cp.Metadata.Namespace, Key: cp.Metadata.Key, Now: now})
			j.RecordState = recordState(cp.MessageID, rec, err)
			if err == nil {
				r := toJSON(rec, now)
				j.Record = &r
			}
		}
		out.Copies = append(out.Copies, j)
	}
	if c.json {
		a.writeJSON(out)
		return nil
	}
	a.writeDLQ(out, st != nil)
	return nil
}

// copyJSON is one copy as dlq shows it, its body cut to body characters
// (-1: whole).
func copyJSON(cp sqsqueue.DeadLetterCopy, now time.Time, body int) dlqCopyJSON {
	md := cp.Metadata
	j := dlqCopyJSON{
		CopyID: cp.MessageID, Reason: string(md.Reason), Namespace: md.Namespace, Key: md.Key, Attempts: md.Attempts,
		SourceARN: md.SourceARN, MessageID: md.MessageID, GroupID: md.GroupID,
		FirstAttemptAt: stamp(md.FirstAttemptAt), LastAttemptAt: stamp(md.LastAttemptAt), SentAt: stamp(cp.SentAt),
		ReceiveCount: cp.ReceiveCount, Error: md.Error, ErrorTruncated: md.ErrorTruncated,
		BodyBytes: len(cp.Body),
	}
	if cp.ParseErr != nil {
		j.NotACopy = cp.ParseErr.Error()
	}
	if !cp.SentAt.IsZero() {
		j.AgeSeconds = max(int64(now.Sub(cp.SentAt)/time.Second), 0)
	}
	j.Body = cp.Body
	if body >= 0 && utf8.RuneCountInString(cp.Body) > body {
		j.Body, j.BodyTruncated = string([]rune(cp.Body)[:body]), true
	}
	return j
}

// recordState says, in a few words, what the record of a copy shows.
func recordState(copyID string, r idemstore.Record, err error) string {
	switch {
	case errors.Is(err, idemstore.ErrNotFound):
		return "absent"
	case err != nil:
		return "unread: " + err.Error()
	case r.Status == idemstore.StatusDeadLettered && r.DeadLetterMessageID != copyID:
		return "DEAD_LETTERED by another copy"
	case r.Abandoned():
		return "DEAD_LETTERED, abandoned"
	case r.Uncertain():
		return "DEAD_LETTERED, awaiting a decision"
	case r.Status == idemstore.StatusDeadLettered:
		return "DEAD_LETTERED"
	case r.Resolution != "" && r.Status == idemstore.StatusCompleted:
		return "COMPLETED (resolved " + string(r.Resolution) + ")"
	}
	return string(r.Status)
}

func (a *app) writeDLQ(out dlqJSON, records bool) {
	if len(out.Copies) == 0 {
		fmt.Fprintf(a.stdout, "no messages to show in %s", safe(out.DLQ))
		if out.Hidden > 0 {
			fmt.Fprintf(a.stdout, " (%d of other reasons)", out.Hidden)
		}
		fmt.Fprintln(a.stdout)
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	header := "COPY\tAGE\tREASON\tKEY\tATTEMPTS\tRECEIVES\t"
	if records {
		header += "RECORD\t"
	}
	fmt.Fprintln(tw, header+"ERROR\tBODY")
	for _, j := range out.Copies {
		age := "-"
		if j.SentAt != "" {
			age = span(time.Duration(j.AgeSeconds) * time.Second)
		}
		reason, key, errText := j.Reason, j.Namespace+"/"+j.Key, j.Error
		if j.NotACopy != "" {
			reason, key, errText = "-", "-", "not a lambdaidem copy"
		} else if j.Key == "" {
			key = "-"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t", safe(j.CopyID), age, safe(orDash(reason)), safe(key), j.Attempts, j.ReceiveCount)
		if records {
			row += safe(orDash(j.RecordState)) + "\t"
		}
		body := j.Body
		if j.BodyTruncated {
			body += "…"
		}
		fmt.Fprintf(tw, "%s%s\t%s\n", row, safe(orDash(oneLine(errText, 50))), safe(body))
	}
	_ = tw.Flush()
	switch {
	case out.More:
		fmt.Fprintf(a.stdout, "%d shown; more in the queue (-max 0 shows all)\n", len(out.Copies))
	case out.Hidden > 0:
		fmt.Fprintf(a.stdout, "%d shown, %d of other reasons not shown\n", len(out.Copies), out.Hidden)
	}
}

// queueFlags are the flags of the commands that receive from a dead-letter
// queue (dlq, redrive, resolve).
type queueFlags struct {
	dlq, sqsEndpoint string
	wait, visibility time.Duration
}

// add defines -dlq (dlqHelp says what the queue is for), -sqs-endpoint,
// -wait and -visibility (its default and what it bounds) on fs.
func (q *queueFlags) add(fs *flag.FlagSet, dlqHelp string, visibility time.Duration, visibilityHelp string) {
	fs.StringVar(&q.dlq, "dlq", "", dlqHelp+" (env LAMBDAIDEM_DLQ_URL)")
	fs.StringVar(&q.sqsEndpoint, "sqs-endpoint", "", "SQS endpoint `URL` (env AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL)")
	fs.DurationVar(&q.wait, "wait", sqsqueue.DefaultRedriveWait, "long-poll wait of each receive (0: short polling)")
	fs.DurationVar(&q.visibility, "visibility", visibility, visibilityHelp)
}

// fromEnv fills the queue and the endpoint the flags left empty from the
// environment, and refuses a missing queue (when needed) and negative
// durations.
func (q *queueFlags) fromEnv(a *app, needed bool) error {
	q.dlq = firstOf(q.dlq, a.env("LAMBDAIDEM_DLQ_URL"))
	q.sqsEndpoint = firstOf(q.sqsEndpoint, a.env("AWS_ENDPOINT_URL_SQS"), a.env("AWS_ENDPOINT_URL"))
	switch {
	case needed && q.dlq == "":
		return usagef("no dead-letter queue: set -dlq or LAMBDAIDEM_DLQ_URL")
	case q.wait < 0 || q.visibility < 0:
		return usagef("-wait and -visibility must not be negative")
	}
	return nil
}

// waitTime is -wait as sqsqueue's options take it: -1 for short polling.
func (q *queueFlags) waitTime() time.Duration {
	if q.wait == 0 {
		return -1
	}
	return q.wait
}
