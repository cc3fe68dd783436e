package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Records are marked at second 1; a decision at second 1000 is past the
// 15-minute default function timeout.
const settled = 1000

// TestRedriveLeavesOutcomeUnknown: without -include-outcome-unknown, a
// redrive (dry or real) leaves an outcome_unknown copy in the DLQ and
// says why on its line and in its summary; asked by name, it sends it.
func TestRedriveLeavesOutcomeUnknown(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetter(t, "order-1", `{"order":1}`)
	mail := rb.deadLetterAs(t, "mail-1", `{"to":"a@example.com"}`, idemstore.ReasonOutcomeUnknown, true)
	args := []string{"redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0"}

	for _, dry := range []bool{true, false} {
		a := args
		verb := "skipped"
		if dry {
			a, verb = append(args[:len(args):len(args)], "-dry-run"), "would skip"
		}
		r := rb.cli(t, settled, a...).want(t, exitOK)
		line := "#2 " + verb + " " + mail + " key orders/mail-1, left in the DLQ: sqsqueue: outcome_unknown: its attempt may have had its effect"
		if !strings.Contains(r.stderr, line) || !strings.Contains(r.stderr, "-include-outcome-unknown") {
			t.Errorf("dry run %t: no line %q in\n%s", dry, line, r.stderr)
		}
		if !strings.Contains(r.stdout, "1 of the skipped were dead-lettered as outcome_unknown") {
			t.Errorf("dry run %t: the summary does not warn:\n%s", dry, r.stdout)
		}
	}
	if g := decode[recordJSON](t, rb.cli(t, settled, "get", "mail-1", "-json").want(t, exitOK)); g.Status != "DEAD_LETTERED" || !g.AwaitingDecision {
		t.Fatalf("the redrive changed the uncertain record: %+v", g)
	}
	// Naming the reason is not enough; the flag is.
	rb.cli(t, settled, append(args, "-reason", "outcome_unknown")...).want(t, exitUsage)
	rb.cli(t, settled, append(args, "-reason", "poisson")...).want(t, exitUsage)
	out := decode[redriveJSON](t, rb.cli(t, settled, append(args, "-include-outcome-unknown", "-copy", mail, "-json")...).want(t, exitOK))
	if out.Moved != 1 || len(out.Messages) != 1 || out.Messages[0].DLQMessageID != mail {
		t.Fatalf("asked by name and ID: %+v", out)
	}
	var bodies []string
	for _, m := range rb.receive(t, rb.src) {
		bodies = append(bodies, *m.Body)
	}
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{`{"order":1}`, `{"to":"a@example.com"}`}) {
		t.Errorf("source queue holds %q, want the order and, asked for by name, the email", bodies)
	}
}

// TestDLQView: dlq shows each copy with its reason, key, attempts, error,
// body and record, says that reading raised the receive counts, and
// leaves every message in the queue.
func TestDLQView(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetter(t, "order-1", `{"order":1}`)
	mail := rb.deadLetterAs(t, "mail-1", `{"to":"a@example.com","subject":"your receipt, with a long subject line"}`, idemstore.ReasonOutcomeUnknown, true)

	r := rb.cli(t, settled, "dlq", "-dlq", rb.dlq, "-wait", "0", "-json").want(t, exitOK)
	for _, want := range []string{"ApproximateReceiveCount raised by one", "visible again at once", "nothing was deleted"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	v := decode[dlqJSON](t, r)
	if len(v.Copies) != 2 || v.More || !strings.Contains(v.Note, "ApproximateReceiveCount") {
		t.Fatalf("dlq: %+v", v)
	}
	i := slices.IndexFunc(v.Copies, func(c dlqCopyJSON) bool { return c.CopyID == mail })
	if i < 0 {
		t.Fatalf("copy %s not shown: %+v", mail, v.Copies)
	}
	c := v.Copies[i]
	if c.Reason != "outcome_unknown" || c.Key != "mail-1" || c.Namespace != "orders" || c.Attempts != 1 || c.Error != "invalid order" ||
		c.ReceiveCount < 1 || c.SentAt == "" || c.RecordState != "DEAD_LETTERED, awaiting a decision" || c.Record == nil || !c.Record.AwaitingDecision {
		t.Errorf("the outcome_unknown copy: %+v", c)
	}
	if c.Body != `{"to":"a@example.com","subject":"your re` || !c.BodyTruncated || c.BodyBytes != 73 {
		t.Errorf("body preview %q (truncated %t, %d bytes)", c.Body, c.BodyTruncated, c.BodyBytes)
	}

	text := rb.cli(t, settled, "dlq", "-dlq", rb.dlq, "-wait", "0", "-reason", "outcome_unknown").want(t, exitOK).stdout
	for _, want := range []string{"COPY", "REASON", "RECEIVES", "RECORD", mail, "orders/mail-1", "DEAD_LETTERED, awaiting a decision", "invalid order", "1 shown, 1 of other reasons not shown"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	// Nothing moved: both copies are in the DLQ, visible at once.
	if n := len(rb.receive(t, rb.dlq)); n != 2 {
		t.Errorf("the DLQ shows %d messages after the view, want 2", n)
	}
}

// TestResolve: each decision, what it leaves, and how get, list, stats
// and dlq report it.
func TestResolve(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	applied := rb.deadLetterAs(t, "mail-1", `{"to":"a@example.com"}`, idemstore.ReasonOutcomeUnknown, true)
	notApplied := rb.deadLetterAs(t, "mail-2", `{"to":"b@example.com"}`, idemstore.ReasonOutcomeUnknown, true)
	rb.deadLetterAs(t, "mail-3", `{"to":"c@example.com"}`, idemstore.ReasonOutcomeUnknown, true)
	rb.deadLetter(t, "order-1", `{"order":1}`)
	rb.env["USER"] = "alice"

	st := decode[statsJSON](t, rb.cli(t, settled, "stats", "-json").want(t, exitOK))
	if st.Uncertain != 3 || st.Abandoned != 0 {
		t.Errorf("stats before: %d awaiting a decision, %d abandoned; want 3, 0", st.Uncertain, st.Abandoned)
	}
	if out := rb.cli(t, settled, "get", "mail-1").want(t, exitOK).stdout; !strings.Contains(out, "AWAITING ONE") {
		t.Errorf("get does not say the record awaits a decision:\n%s", out)
	}

	// Refused, changing nothing: no decision, no note, not confirmed, too
	// soon, a record that is not uncertain.
	rb.cli(t, settled, "resolve", "mail-1", "-note", "x").want(t, exitUsage)
	rb.cli(t, settled, "resolve", "mail-1", "-applied").want(t, exitUsage)
	rb.cli(t, settled, "resolve", "mail-1", "-applied", "-not-applied", "-note", "x").want(t, exitUsage)
	rb.cli(t, settled, "resolve", "mail-1", "-applied", "-note", "x").want(t, exitRefused)
	if r := rb.cli(t, 100, "resolve", "mail-1", "-applied", "-note", "x", "-yes").want(t, exitRefused); !strings.Contains(r.stderr, "may still be running") {
		t.Errorf("too soon: %s", r.stderr)
	}
	rb.cli(t, settled, "resolve", "order-1", "-applied", "-note", "x", "-yes").want(t, exitRefused)
	rb.cli(t, settled, "resolve", "mail-2", "-not-applied", "-note", "x", "-yes").want(t, exitUsage) // no -dlq, -source
	if g := decode[recordJSON](t, rb.cli(t, settled, "get", "mail-1", "-json")); g.Status != "DEAD_LETTERED" || g.Resolution != "" {
		t.Fatalf("a refusal changed the record: %+v", g)
	}

	// Applied: COMPLETED, the copy deleted.
	r := rb.cli(t, settled, "resolve", "mail-1", "-applied", "-note", "the mail server logged it as delivered", "-yes", "-dlq", rb.dlq, "-wait", "0", "-json").want(t, exitOK)
	res := decode[resolveJSON](t, r)
	if res.Copy != "deleted" || res.CopyID != applied || res.Record.Status != "COMPLETED" || res.Record.Resolution != "applied" ||
		!strings.Contains(res.Record.ResolutionNote, "applied by alice") || !strings.Contains(res.Record.ResolutionNote, "logged it as delivered") {
		t.Errorf("applied: %+v", res)
	}
	if out := rb.cli(t, settled, "get", "mail-1").want(t, exitOK).stdout; !strings.Contains(out, "resolution       applied by alice") {
		t.Errorf("get does not show the decision:\n%s", out)
	}

	// Not applied: the copy goes back to run once more.
	res = decode[resolveJSON](t, rb.cli(t, settled, "resolve", "mail-2", "-not-applied", "-note", "bounced", "-yes", "-by", "bob",
		"-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json").want(t, exitOK))
	if res.Copy != "moved" || res.CopyID != notApplied || res.NewMessageID == "" || res.Record.Status != "FAILED" || res.Record.RedrivenFrom != notApplied {
		t.Errorf("not applied: %+v", res)
	}
	if back := rb.receive(t, rb.src); len(back) != 1 || *back[0].Body != `{"to":"b@example.com"}` {
		t.Errorf("the source queue holds %d messages, want mail-2's", len(back))
	}

	// Abandoned: kept, reported as such, never redriven, final.
	text := rb.cli(t, settled, "resolve", "mail-3", "-abandon", "-note", "customer asked us to stop", "-yes").want(t, exitOK).stdout
	if !strings.Contains(text, "as abandoned") || !strings.Contains(text, "stays in the DLQ") {
		t.Errorf("abandon says:\n%s", text)
	}
	rb.cli(t, settled, "resolve", "mail-3", "-applied", "-note", "x", "-yes").want(t, exitRefused)
	if out := rb.cli(t, settled, "get", "mail-3").want(t, exitOK).stdout; !strings.Contains(out, "ABANDONED") {
		t.Errorf("get does not say abandoned:\n%s", out)
	}
	if out := rb.cli(t, settled, "list", "-dead-lettered").want(t, exitOK).stdout; !strings.Contains(out, "abandoned: abandoned by alice") {
		t.Errorf("list does not say abandoned:\n%s", out)
	}
	st = decode[statsJSON](t, rb.cli(t, settled, "stats", "-json").want(t, exitOK))
	if st.Uncertain != 0 || st.Abandoned != 1 || *st.Counts[idemstore.StatusDeadLettered] != 2 {
		t.Errorf("stats after: %d awaiting, %d abandoned, %d dead-lettered; want 0, 1, 2", st.Uncertain, st.Abandoned, *st.Counts[idemstore.StatusDeadLettered])
	}
	if out := rb.cli(t, settled, "stats").want(t, exitOK).stdout; !strings.Contains(out, "1 abandoned") {
		t.Errorf("stats does not say abandoned:\n%s", out)
	}
	v := decode[dlqJSON](t, rb.cli(t, settled, "dlq", "-dlq", rb.dlq, "-wait", "0", "-json").want(t, exitOK))
	states := map[string]string{}
	for _, c := range v.Copies {
		states[c.Key] = c.RecordState
	}
	if len(v.Copies) != 2 || states["mail-3"] != "DEAD_LETTERED, abandoned" || states["order-1"] != "DEAD_LETTERED" {
		t.Errorf("dlq after the decisions: %v", states)
	}
	out := decode[redriveJSON](t, rb.cli(t, settled, "redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-include-outcome-unknown", "-json").want(t, exitOK))
	for _, m := range out.Messages {
		if m.Key == "mail-3" && (m.Outcome != "skipped" || !strings.Contains(m.Error, "abandoned")) {
			t.Errorf("redrive of the abandoned copy: %+v", m)
		}
	}
}
