package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)

	r := decode[recordJSON](t, b.cli(t, 300, "get", "order-running", "-json").want(t, exitOK))
	if r.Status != "IN_PROGRESS" || r.LeaseState != leaseValid || r.Attempts != 1 || r.Namespace != "orders" ||
		r.LeaseUntil != "2026-03-14T09:10:00Z" || r.MessageID != "msg-order-running" {
		t.Errorf("get order-running: %+v", r)
	}
	out := b.cli(t, 300, "get", "order-running").want(t, exitOK).stdout
	for _, want := range []string{
		"table            " + b.table + "\n",
		"key              order-running\n",
		"status           IN_PROGRESS\n",
		"lease            valid until 2026-03-14T09:10:00Z (in 5m)\n",
		"attempts         1\n",
		"updated          2026-03-14T09:00:00Z (5m ago)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}

	// The same record after its lease ran out.
	if r := decode[recordJSON](t, b.cli(t, 700, "get", "-json", "order-running")); r.LeaseState != leaseExpired {
		t.Errorf("lease_state at 700: %q, want expired", r.LeaseState)
	}
	if out := b.cli(t, 700, "get", "order-running").stdout; !strings.Contains(out, "EXPIRED at 2026-03-14T09:10:00Z (1m40s ago)") {
		t.Errorf("expired lease not shown:\n%s", out)
	}

	dl := decode[recordJSON](t, b.cli(t, 0, "get", "order-poison", "-json").want(t, exitOK))
	if dl.Status != "DEAD_LETTERED" || dl.DeadLetterReason != "poison" || dl.DeadLetterMessageID != "dlq-order-poison" || dl.LeaseState != "" {
		t.Errorf("get order-poison: %+v", dl)
	}
	done := decode[recordJSON](t, b.cli(t, 0, "get", "order-done", "-json").want(t, exitOK))
	var compact bytes.Buffer
	if err := json.Compact(&compact, done.Result); err != nil || compact.String() != `{"receipt":"r-1"}` || done.ResultBytes != 17 {
		t.Errorf("result: %s (%d bytes)", done.Result, done.ResultBytes)
	}
	failed := b.cli(t, 0, "get", "order-failed").want(t, exitOK).stdout
	if !strings.Contains(failed, "last error       charge card: 503 Service Unavailable\n                 retry budget exhausted\n") {
		t.Errorf("multi-line last error not aligned:\n%s", failed)
	}

	// Not found, in either output form, names table, namespace and key.
	nf := b.cli(t, 0, "get", "nope").want(t, exitNotFound)
	if !strings.Contains(nf.stderr, `key "nope" in namespace "orders" of table `+b.table) {
		t.Errorf("not-found message: %s", nf.stderr)
	}
	if e := decode[errorJSON](t, b.cli(t, 0, "get", "nope", "-json").want(t, exitNotFound)); e.Code != "not_found" {
		t.Errorf("JSON error: %+v", e)
	}
	// Expired records are absent.
	b.cli(t, 5*86400, "get", "order-failed").want(t, exitNotFound)
	// Other namespace through the flag.
	if r := decode[recordJSON](t, b.cli(t, 0, "get", "-namespace", "billing", "inv-1", "-json").want(t, exitOK)); r.Key != "inv-1" {
		t.Errorf("billing/inv-1: %+v", r)
	}
}

func keysOf(l listJSON) []string {
	var keys []string
	for _, r := range l.Records {
		keys = append(keys, r.Key)
	}
	return keys
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)
	const now = 300
	for _, tc := range []struct {
		args []string
		want []string // oldest update first
	}{
		{nil, []string{"order-poison", "order-stuck", "order-failed", "order-running"}},
		{[]string{"-stuck"}, []string{"order-stuck"}},
		{[]string{"-failed"}, []string{"order-failed"}},
		{[]string{"-dead-lettered"}, []string{"order-poison"}},
		{[]string{"-status", "FAILED,dead_lettered"}, []string{"order-poison", "order-failed"}},
		{[]string{"-status", "IN_PROGRESS"}, []string{"order-stuck", "order-running"}},
		{[]string{"-older-than", "1h"}, []string{"order-poison", "order-stuck"}},
		{[]string{"-older-than", "40m", "-failed"}, nil},
		{[]string{"-stuck", "-failed"}, []string{"order-stuck", "order-failed"}},
		{[]string{"-limit", "2"}, []string{"order-poison", "order-stuck"}},
		{[]string{"-namespace", "", "-failed"}, []string{"order-failed", "inv-1"}},
		{[]string{"-namespace", "billing"}, []string{"inv-1"}},
	} {
		args := append([]string{"list", "-json"}, tc.args...)
		l := decode[listJSON](t, b.cli(t, now, args...).want(t, exitOK))
		if got := keysOf(l); !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.args, got, tc.want)
		}
		if l.More != slices.Contains(tc.args, "-limit") {
			t.Errorf("list %v: more = %t", tc.args, l.More)
		}
	}

	// Stuck means the lease has expired at the command's clock.
	if got := keysOf(decode[listJSON](t, b.cli(t, 601, "list", "-json", "-stuck"))); !slices.Equal(got, []string{"order-stuck", "order-running"}) {
		t.Errorf("stuck at 601: %v", got)
	}

	table := b.cli(t, now, "list").want(t, exitOK).stdout
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "STATUS") || !strings.Contains(lines[0], "KEY") || strings.Contains(lines[0], "NAMESPACE") {
		t.Fatalf("table:\n%s", table)
	}
	col := strings.Index(lines[0], "KEY")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "order-") {
			t.Errorf("KEY column not aligned in %q", l)
		}
	}
	if !strings.Contains(table, "EXPIRED 1h4m ago") || !strings.Contains(table, "poison: invalid order: no line items") ||
		!strings.Contains(table, "charge card: 503 Service Unavailable …") {
		t.Errorf("table content:\n%s", table)
	}
	if all := b.cli(t, now, "list", "-namespace", "").stdout; !strings.Contains(all, "NAMESPACE") || !strings.Contains(all, "billing") {
		t.Errorf("all-namespace table:\n%s", all)
	}
	if out := b.cli(t, now, "list", "-failed", "-older-than", "40m").stdout; !strings.Contains(out, "no matching records") {
		t.Errorf("empty listing: %q", out)
	}

	// Progress on stderr for listings of several pages; -limit says so.
	r := b.cli(t, now, "list", "-page-size", "1", "-limit", "3").want(t, exitOK)
	if !strings.Contains(r.stderr, "list: IN_PROGRESS: 2 pages read") || !strings.Contains(r.stderr, "stopped at -limit 3") {
		t.Errorf("progress lines: %q", r.stderr)
	}
	if r := b.cli(t, now, "list", "-page-size", "1", "-quiet"); r.stderr != "" {
		t.Errorf("-quiet still wrote %q", r.stderr)
	}

	// Usage errors.
	b.cli(t, now, "list", "-status", "COMPLETED").want(t, exitUsage)
	b.cli(t, now, "list", "-status", "DONE").want(t, exitUsage)
	b.cli(t, now, "list", "extra").want(t, exitUsage)
	b.cli(t, now, "list", "-limit", "-1").want(t, exitUsage)
}

func TestRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)

	// A live lease is refused, and nothing changes.
	r := b.cli(t, 300, "release", "order-running").want(t, exitRefused)
	if !strings.Contains(r.stderr, "runs until 2026-03-14T09:10:00Z (in 5m)") || !strings.Contains(r.stderr, b.table) || !strings.Contains(r.stderr, "-force") {
		t.Errorf("refusal message: %s", r.stderr)
	}
	if e := decode[errorJSON](t, b.cli(t, 300, "release", "order-running", "-json").want(t, exitRefused)); e.Code != "refused" {
		t.Errorf("JSON refusal: %+v", e)
	}
	if g := decode[recordJSON](t, b.cli(t, 300, "get", "order-running", "-json")); g.Status != "IN_PROGRESS" || g.LeaseState != leaseValid {
		t.Fatalf("refused release changed the record: %+v", g)
	}
	// So is one that ended less than the grace ago.
	b.cli(t, 601, "release", "order-running").want(t, exitRefused)

	// -force revokes it: the holder is fenced off at once, and the key is
	// taken over only once the lease it had has run out.
	holder := b.claimed(t, "orders", "order-running", 0)
	rel := decode[releaseJSON](t, b.cli(t, 300, "release", "order-running", "-force", "-json").want(t, exitOK))
	if !rel.Released || !rel.Forced || !rel.Revoked || rel.ClaimableAt != "2026-03-14T09:10:02Z" ||
		rel.Record.Status != "IN_PROGRESS" || rel.Record.LeaseUntil != "2026-03-14T09:10:00Z" || rel.Record.LastError != "lease released by operator" {
		t.Errorf("forced release: %+v", rel)
	}
	if err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: holder, Now: at(301), ExpiresAt: at(86400)}); !errors.Is(err, idemstore.ErrLeaseLost) {
		t.Errorf("the holder's completion after the revocation: %v, want ErrLeaseLost", err)
	}
	b.refusedClaim(t, "orders", "order-running", 602)
	if l := b.claim(t, "orders", "order-running", 603, 30); l.Attempt != 2 {
		t.Errorf("takeover after the revoked lease ran out: attempt %d, want 2", l.Attempt)
	}
	out := b.cli(t, 300, "release", "order-stuck", "-force").want(t, exitOK).stdout
	if !strings.Contains(out, "released key \"order-stuck\"") {
		t.Errorf("forced release of an ended lease: %s", out)
	}

	// An ended lease is released without -force, attempts kept, and the
	// words say what runs it next.
	b.claim(t, "orders", "order-late", -3600, 30)
	out = b.cli(t, 300, "release", "order-late", "-note", "worker OOM, INC-7").want(t, exitOK).stdout
	for _, want := range []string{`released key "order-late"`, "it is FAILED now, after 1 attempt", "the next delivery of message msg-order-late", "claims it as attempt 2", "max_attempts"} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q: %s", want, out)
		}
	}
	g := decode[recordJSON](t, b.cli(t, 300, "get", "order-late", "-json"))
	if g.Status != "FAILED" || g.LastError != "worker OOM, INC-7" || g.UpdatedAt != "2026-03-14T09:05:00Z" {
		t.Errorf("after release: %+v", g)
	}
	// The key is claimable again, counting on.
	if l := b.claim(t, "orders", "order-late", 310, 30); l.Attempt != 2 {
		t.Errorf("claim after release: attempt %d, want 2", l.Attempt)
	}

	// Not IN_PROGRESS: nothing to release.
	if r := b.cli(t, 300, "release", "order-failed").want(t, exitRefused); !strings.Contains(r.stderr, "is FAILED, not IN_PROGRESS") {
		t.Errorf("release of FAILED: %s", r.stderr)
	}
	b.cli(t, 300, "release", "nope").want(t, exitNotFound)
	b.cli(t, 300, "release").want(t, exitUsage)
	b.cli(t, 300, "release", "a", "b").want(t, exitUsage)
}

func TestForget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)

	// Not a terminal and no -yes: refused, kept.
	r := b.cli(t, 300, "forget", "order-done").want(t, exitRefused)
	if !strings.Contains(r.stderr, "-yes") {
		t.Errorf("refusal without -yes: %s", r.stderr)
	}
	b.cli(t, 300, "get", "order-done").want(t, exitOK)

	// A terminal answering no, then yes.
	r = b.cliWith(t, 300, strings.NewReader("n\n"), "forget", "order-done").want(t, exitRefused)
	if !strings.Contains(r.stderr, "Forget key \"order-done\" in namespace \"orders\" of table "+b.table+" (COMPLETED, 1 attempt)? [y/N]") {
		t.Errorf("prompt: %s", r.stderr)
	}
	b.cliWith(t, 300, strings.NewReader("y\n"), "forget", "order-done").want(t, exitOK)
	b.cli(t, 300, "get", "order-done").want(t, exitNotFound)

	// Forgetting a dead-lettered record would strand its copy: refused,
	// with the reason and the way out.
	r = b.cli(t, 300, "forget", "order-poison", "-yes").want(t, exitRefused)
	for _, want := range []string{"DEAD_LETTERED", "copy dlq-order-poison", "lambdaidem redrive", "-abandon-copy"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal of a dead-lettered record lacks %q: %s", want, r.stderr)
		}
	}
	b.cli(t, 300, "get", "order-poison").want(t, exitOK)
	f := decode[forgetJSON](t, b.cli(t, 300, "forget", "order-poison", "-yes", "-abandon-copy", "-json").want(t, exitOK))
	if !f.Forgotten || f.Revoked || f.Record.Status != "DEAD_LETTERED" {
		t.Errorf("forget -abandon-copy -json: %+v", f)
	}
	b.cli(t, 300, "forget", "order-poison", "-yes").want(t, exitNotFound)

	// A live lease needs -force, even with -yes; -force revokes it and the
	// record is forgotten once the lease has run out, not before.
	b.cli(t, 300, "forget", "order-running", "-yes").want(t, exitRefused)
	b.cli(t, 300, "get", "order-running").want(t, exitOK)
	out := b.cli(t, 300, "forget", "order-running", "-yes", "-force").want(t, exitOK).stdout
	if !strings.Contains(out, "revoked the lease") || !strings.Contains(out, "forgotten at 2026-03-14T09:10:02Z") {
		t.Errorf("forced forget of a live lease: %s", out)
	}
	b.refusedClaim(t, "orders", "order-running", 400)
	b.cli(t, 602, "get", "order-running").want(t, exitOK)
	b.cli(t, 603, "get", "order-running").want(t, exitNotFound)
	if l := b.claim(t, "orders", "order-running", 603, 30); l.Attempt != 1 {
		t.Errorf("claim after the forced forget: attempt %d, want 1 (a new record)", l.Attempt)
	}
	// An ended lease does not need -force; the words say what runs next.
	out = b.cli(t, 300, "forget", "-yes", "order-stuck").want(t, exitOK).stdout
	if !strings.Contains(out, "the next delivery of message msg-order-stuck") || !strings.Contains(out, "attempt 1 of a new record") {
		t.Errorf("forget of a stuck record: %s", out)
	}
	out = b.cli(t, 300, "forget", "-yes", "order-done-2").want(t, exitOK).stdout
	if !strings.Contains(out, "the next message with this key runs the handler") || !strings.Contains(out, "is not delivered again") {
		t.Errorf("forget of a completed record: %s", out)
	}

	// The forgotten key runs afresh.
	if l := b.claim(t, "orders", "order-done", 400, 30); l.Attempt != 1 {
		t.Errorf("claim after forget: attempt %d, want 1", l.Attempt)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)
	count := func(s statsJSON, st idemstore.Status) int {
		t.Helper()
		if s.Counts[st] == nil {
			t.Fatalf("%s not counted: %+v", st, s)
		}
		return *s.Counts[st]
	}

	s := decode[statsJSON](t, b.cli(t, 300, "stats", "-json").want(t, exitOK))
	if count(s, idemstore.StatusInProgress) != 2 || s.Stuck != 1 || count(s, idemstore.StatusFailed) != 1 ||
		count(s, idemstore.StatusDeadLettered) != 1 || s.Counts[idemstore.StatusCompleted] != nil {
		t.Errorf("stats: %+v", s)
	}
	if !strings.Contains(b.cli(t, 300, "stats", "-json").stdout, `"COMPLETED": null`) {
		t.Error("COMPLETED is not null without -all")
	}

	r := b.cli(t, 300, "stats", "-all", "-json", "-namespace", "").want(t, exitOK)
	s = decode[statsJSON](t, r)
	if count(s, idemstore.StatusCompleted) != 3 || count(s, idemstore.StatusFailed) != 2 {
		t.Errorf("stats -all over all namespaces: %+v", s)
	}
	if !strings.Contains(r.stderr, "stats: COMPLETED: 1 pages, 8 items read, 3 counted") {
		t.Errorf("scan progress: %q", r.stderr)
	}

	out := b.cli(t, 300, "stats").want(t, exitOK).stdout
	for _, want := range []string{"IN_PROGRESS    2        1 stuck (lease expired)", "FAILED         1", "COMPLETED      -        not counted"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
}

// TestErrors: usage errors, help, and failures that name the table.
func TestErrors(t *testing.T) {
	t.Parallel()
	b := &bundle{env: map[string]string{"AWS_REGION": "us-east-1"}}
	b.cli(t, 0).want(t, exitUsage)
	b.cli(t, 0, "frobnicate").want(t, exitUsage)
	if r := b.cli(t, 0, "get", "k").want(t, exitUsage); !strings.Contains(r.stderr, "no table") {
		t.Errorf("missing table: %s", r.stderr)
	}
	b.env["LAMBDAIDEM_TABLE"] = "t"
	b.cli(t, 0, "get", "-namespace", "a#b", "k").want(t, exitUsage)
	b.cli(t, 0, "get", "-bogus", "k").want(t, exitUsage)
	b.cli(t, 0, "redrive").want(t, exitUsage)

	// Help goes to stdout with exit 0, through the real entry point too.
	for _, args := range [][]string{{"-h"}, {"help"}, {"get", "-h"}, {"list", "k", "--help"}, {"redrive", "-h"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut, func(string) string { return "" }); code != exitOK || out.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}

	// A table that does not exist is an operation failure naming it.
	e := setup(t)
	e.env["LAMBDAIDEM_TABLE"] = "no-such-table-" + e.table
	if r := e.cli(t, 0, "get", "k").want(t, exitFailed); !strings.Contains(r.stderr, "no-such-table-") {
		t.Errorf("missing table message: %s", r.stderr)
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{999 * time.Millisecond, "now"},
		{-999 * time.Millisecond, "now"},
		{45 * time.Second, "in 45s"},
		{-3 * time.Minute, "3m ago"},
		{3*time.Minute + 20*time.Second, "in 3m20s"},
		{5*time.Hour + 3*time.Minute + 59*time.Second, "in 5h3m"},
		{-(4*24*time.Hour + 2*time.Hour + 30*time.Minute), "4d2h ago"},
		{48 * time.Hour, "in 2d"},
	} {
		if got := relative(t0.Add(tc.d), t0); got != tc.want {
			t.Errorf("relative(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestIsTerminal: the null device is a character device but no terminal;
// forget must not prompt on it (cron, CI, nohup).
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Errorf("%s taken for a terminal", os.DevNull)
	}
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file taken for a terminal")
	}
}
