package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Lease states as shown to operators.
const (
	leaseValid   = "valid"
	leaseExpired = "expired"
)

// leaseState tells whether an IN_PROGRESS record's lease still runs at now;
// "" for other states, which hold no lease.
func leaseState(r idemstore.Record, now time.Time) string {
	if r.Status != idemstore.StatusInProgress {
		return ""
	}
	if r.LeaseUntil.Before(now) {
		return leaseExpired
	}
	return leaseValid
}

// recordJSON is a record as -json prints it. Field names follow the stored
// attributes (dynamo's doc.go); times are RFC 3339 UTC, absent when unset.
type recordJSON struct {
	Namespace             string          `json:"namespace"`
	Key                   string          `json:"key"`
	Status                string          `json:"status"`
	LeaseState            string          `json:"lease_state,omitempty"`
	LeaseToken            string          `json:"lease_token,omitempty"`
	LeaseUntil            string          `json:"lease_until,omitempty"`
	Attempts              int             `json:"attempts"`
	Takeovers             int             `json:"takeovers"`
	Generation            string          `json:"generation,omitempty"`
	Claim                 int64           `json:"claim"`
	PayloadHash           string          `json:"payload_hash,omitempty"`
	MessageID             string          `json:"message_id,omitempty"`
	ResultBytes           int             `json:"result_bytes"`
	Result                json.RawMessage `json:"result,omitempty"`
	ResultBase64          []byte          `json:"result_base64,omitempty"`
	ResultUntil           string          `json:"result_until,omitempty"`
	ExpiresAt             string          `json:"expires_at,omitempty"`
	LastError             string          `json:"last_error,omitempty"`
	DeadLetterReason      string          `json:"dead_letter_reason,omitempty"`
	DeadLetteredMessageID string          `json:"dead_lettered_message_id,omitempty"`
	DeadLetterMessageID   string          `json:"dead_letter_message_id,omitempty"`
	FirstAttemptAt        string          `json:"first_attempt_at,omitempty"`
	UpdatedAt             string          `json:"updated_at,omitempty"`
	SchemaVersion         int             `json:"schema_version"`
	Redrives              int             `json:"redrives,omitempty"`
	RedrivenFrom          string          `json:"redriven_from,omitempty"`
	Resolution            string          `json:"resolution,omitempty"`
	ResolutionNote        string          `json:"resolution_note,omitempty"`
	// AwaitingDecision is true for a record DEAD_LETTERED as
	// outcome_unknown that no operator resolved.
	AwaitingDecision bool `json:"awaiting_decision,omitempty"`
}

func toJSON(r idemstore.Record, now time.Time) recordJSON {
	j := recordJSON{
		Namespace: r.Namespace, Key: r.Key, Status: string(r.Status),
		LeaseState: leaseState(r, now), LeaseToken: r.LeaseToken, LeaseUntil: stamp(r.LeaseUntil),
		Attempts: r.Attempts, Takeovers: r.Takeovers,
		Generation: r.Fence.Generation, Claim: r.Fence.Claim,
		PayloadHash: r.PayloadHash, MessageID: r.MessageID,
		ResultBytes: len(r.Result), ResultUntil: stamp(r.ResultUntil), ExpiresAt: stamp(r.ExpiresAt),
		LastError:             r.LastError,
		DeadLetterReason:      string(r.DeadLetterReason),
		DeadLetteredMessageID: r.DeadLetteredMessageID, DeadLetterMessageID: r.DeadLetterMessageID,
		FirstAttemptAt: stamp(r.FirstAttemptAt), UpdatedAt: stamp(r.UpdatedAt),
		SchemaVersion: r.SchemaVersion,
		Redrives:      r.Redrives, RedrivenFrom: r.RedrivenFrom,
		Resolution: string(r.Resolution), ResolutionNote: r.ResolutionNote,
		AwaitingDecision: r.Uncertain(),
	}
	// Wrap stores JSON results: show them as JSON, anything else as bytes.
	if len(r.Result) > 0 {
		if json.Valid(r.Result) {
			j.Result = r.Result
		} else {
			j.ResultBase64 = r.Result
		}
	}
	return j
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// when shows a time for people: RFC 3339 in UTC with milliseconds when they
// matter, and how far it is from now.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	layout := time.RFC3339
	if t.Nanosecond() != 0 {
		layout = "2006-01-02T15:04:05.000Z07:00"
	}
	return t.UTC().Format(layout) + " (" + relative(t, now) + ")"
}

// relative says "in 3m", "5m ago" or "now", in at most two units.
func relative(t, now time.Time) string {
	d := t.Sub(now)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	if d > 0 {
		return "in " + span(d)
	}
	return span(-d) + " ago"
}

// span rounds a duration down to its two largest units: 45s, 3m20s, 5h3m,
// 4d2h.
func span(d time.Duration) string {
	const day = 24 * time.Hour
	two := func(big, small time.Duration, bu, su string) string {
		b, s := d/big, (d%big)/small
		if s == 0 {
			return fmt.Sprintf("%d%s", b, bu)
		}
		return fmt.Sprintf("%d%s%d%s", b, bu, s, su)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return two(time.Minute, time.Second, "m", "s")
	case d < day:
		return two(time.Hour, time.Minute, "h", "m")
	}
	return two(day, time.Hour, "d", "h")
}

// writeRecord prints a record as aligned "field value" lines.
func writeRecord(w io.Writer, table string, r idemstore.Record, now time.Time) {
	line := func(name, format string, args ...any) {
		fmt.Fprintf(w, "%-16s %s\n", name, fmt.Sprintf(format, args...))
	}
	line("table", "%s", safe(table))
	line("namespace", "%s", safe(r.Namespace))
	line("key", "%s", safe(r.Key))
	line("status", "%s", safe(string(r.Status)))
	switch state := leaseState(r, now); state {
	case leaseValid:
		line("lease", "valid until %s", when(r.LeaseUntil, now))
	case leaseExpired:
		line("lease", "EXPIRED at %s: stuck unless its holder is still finishing; see \"release\"", when(r.LeaseUntil, now))
	default:
		// The lease ended when the record left IN_PROGRESS (updated),
		// whatever its lease_until says.
		line("lease", "none (the record is %s)", safe(string(r.Status)))
	}
	line("lease token", "%s", safe(orDash(r.LeaseToken)))
	takeovers := ""
	if r.Takeovers > 0 {
		takeovers = fmt.Sprintf(" (%d abandoned: taken over after a crash or timeout)", r.Takeovers)
	}
	line("attempts", "%d%s", r.Attempts, takeovers)
	if r.Redrives > 0 {
		line("redrives", "%d (attempts counted again from 0 after each; last from DLQ copy %s)", r.Redrives, safe(orDash(r.RedrivenFrom)))
	}
	line("fence", "generation %s, claim %d", safe(orDash(r.Fence.Generation)), r.Fence.Claim)
	line("message id", "%s", safe(orDash(r.MessageID)))
	line("payload hash", "%s", safe(orDash(r.PayloadHash)))
	line("first attempt", "%s", when(r.FirstAttemptAt, now))
	line("updated", "%s", when(r.UpdatedAt, now))
	if r.ExpiresAt.IsZero() {
		line("expires", "never")
	} else {
		line("expires", "%s", when(r.ExpiresAt, now))
	}
	if r.Status == idemstore.StatusCompleted {
		line("result", "%s", describeResult(r.Result))
		if !r.ResultUntil.IsZero() {
			line("result until", "%s", when(r.ResultUntil, now))
		}
	}
	if r.Status == idemstore.StatusDeadLettered {
		line("dead letter", "reason %s, source message %s, DLQ copy %s",
			safe(orDash(string(r.DeadLetterReason))), safe(orDash(r.DeadLetteredMessageID)), safe(orDash(r.DeadLetterMessageID)))
		switch {
		case r.Abandoned():
			line("decision", "ABANDONED: never run again, and no redrive sends its copy back")
		case r.Uncertain():
			line("decision", "AWAITING ONE: its effect may have happened. Find out, then \"resolve\" it (-applied, -not-applied or -abandon)")
		}
	}
	if r.Resolution != "" {
		line("resolution", "%s", safe(r.ResolutionNote))
	}
	if r.LastError != "" {
		lines := strings.Split(strings.TrimRight(r.LastError, "\n"), "\n")
		line("last error", "%s", safe(lines[0]))
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%-16s %s\n", "", safe(l))
		}
	}
}

func describeResult(b []byte) string {
	switch {
	case len(b) == 0:
		return "none"
	}
	if reason, ok := lambdaidem.ResultNotStored(b); ok {
		return "not stored (" + reason + "); a repeat gets ErrResultNotStored"
	}
	switch {
	case json.Valid(b) && len(b) <= 200:
		return fmt.Sprintf("%d bytes: %s", len(b), safe(string(b)))
	}
	return fmt.Sprintf("%d bytes (-json shows it)", len(b))
}

// attempts says "1 attempt", "2 attempts".
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// trimLines drops the padding tabwriter leaves at the end of lines.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens text for a table cell: the first line, at most n runes.
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		return string(r[:n-1]) + "…"
	}
	if cut {
		return s + " …"
	}
	return s
}

// safe makes text from the table fit to print on a terminal. Keys come from
// message bodies, so a record may hold escape sequences, control bytes,
// bidirectional overrides or bytes that are not UTF-8: such text is printed
// Go-quoted, with those runes escaped. Text that starts with a double quote
// is quoted too, so a quoted value is never mistaken for a plain one.
func safe(s string) string {
	if strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return strconv.Quote(s)
			}
		}
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
