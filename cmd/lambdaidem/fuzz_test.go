package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// printable reports whether out holds only what a terminal shows as text:
// printable runes, spaces and newlines.
func printable(out string) bool {
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// FuzzFormat prints records holding arbitrary text, as a hand-written item
// or a message body could leave them: the human output holds nothing a
// terminal would act on, every value reads back exactly from what is shown,
// and the JSON output is valid.
func FuzzFormat(f *testing.F) {
	f.Add("orders", "order-1", "COMPLETED", "poison", "poison: bad", "tok", "hash", []byte(`{"a":1}`), int64(0), int64(60))
	f.Add("ns\x7f", "evil\x1b]0;pwned\x07\x1b[2J", "IN_PROGRESS", "", "line1\r\nline2\x00", "\u202e", "\xff", []byte("\xff\x1b"), int64(-1), int64(-1<<62))
	f.Add("\"quoted\"", "k\tk", "DEAD_LETTERED", "max\x1b", "\x85next", "", "", []byte(`"\u001b"`), int64(1<<62), int64(253402300800))
	f.Add("", "", "", "", "", "", "", []byte(nil), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, ns, key, status, reason, lastErr, token, hash string, result []byte, lease, updated int64) {
		now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
		r := idemstore.Record{
			Namespace: ns, Key: key, Status: idemstore.Status(status), DeadLetterReason: idemstore.Reason(reason),
			LastError: lastErr, LeaseToken: token, PayloadHash: hash, Result: result, MessageID: key,
			LeaseUntil: time.UnixMilli(lease).UTC(), UpdatedAt: time.Unix(updated, 0).UTC(), Attempts: 1,
		}
		var out bytes.Buffer
		writeRecord(&out, "t", r, now)
		a := &app{stdout: &out}
		a.writeTable(&common{table: "t"}, []idemstore.Record{r}, now)
		if !printable(out.String()) {
			t.Fatalf("output holds a non-printable rune:\n%q", out.String())
		}
		for _, v := range []string{ns, key, status, token, hash} {
			shown := safe(v)
			if shown == v {
				continue
			}
			if back, err := strconv.Unquote(shown); err != nil || back != v {
				t.Fatalf("%q is shown as %s, which reads back as %q (%v)", v, shown, back, err)
			}
		}
		var js bytes.Buffer
		(&app{stdout: &js}).writeJSON(toJSON(r, now))
		if !json.Valid(js.Bytes()) {
			t.Fatalf("-json output is not JSON: %q", js.String())
		}
	})
}

// FuzzFlags parses arbitrary command lines (arguments separated by NUL)
// for every subcommand: parsing ends in flags and arguments or an error,
// never a panic, and prints nothing a terminal would act on.
func FuzzFlags(f *testing.F) {
	for _, s := range []string{
		"-status\x00FAILED,dead_lettered\x00-limit\x002", "-older-than\x00-1h", "-status\x00COMPLETED", "-status\x00\x1b[2J",
		"--\x00-json", "k\x00-json\x00-namespace\x00a#b", "-page-size\x000", "-limit\x0099999999999999999999", "-bogus\x1b",
		"-dlq\x00https://sqs.evil.example/x\x00--dry-run",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		for _, cmd := range commands() {
			var stderr bytes.Buffer
			a := &app{stdout: io.Discard, stderr: &stderr, env: func(string) string { return "" }, now: time.Now}
			_, _, err := a.parse(cmd, args)
			if err != nil && err != flag.ErrHelp && err.Error() == "" {
				t.Fatalf("%s %q: empty error", cmd.name, args)
			}
		}
	})
}
