package lambdaidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// keyReports runs one message per body, in turn, through a decorator with
// opts and a dead-letter sink, and returns each record's report.
func keyReports(t *testing.T, opts []lambdaidem.Option, bodies ...string) ([]lambdaidem.RecordReport, *bundle) {
	t.Helper()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(append(opts, lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu))...)...)
	var out []lambdaidem.RecordReport
	for i, body := range bodies {
		id := "m" + string(rune('a'+i))
		resp, _ := h(context.Background(), batch(msg(id, body)))
		wantFailed(t, resp) // acknowledged: run, duplicate or dead-lettered
		out = append(out, reps[len(reps)-1].Records[0])
	}
	return out, b
}

func TestProducerDuplicateByBusinessKeyAndConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("order.id"))...)
	ctx := context.Background()
	if _, err := h(ctx, batch(msg("m1", `{"order":{"id":"o-1"},"amount":5}`))); err != nil {
		t.Fatal(err)
	}
	// Same business key and body, new message ID: a producer duplicate.
	resp, err := h(ctx, batch(msg("m2", `{"order":{"id":"o-1"},"amount":5}`)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if b.calls.get("m2") != 0 {
		t.Fatal("handler ran for a producer duplicate")
	}
	// Same key, different payload: a conflict, never "already done". With
	// no sink it is reported failed.
	resp, _ = h(ctx, batch(msg("m3", `{"order":{"id":"o-1"},"amount":6}`), msg("m4", `{"order":{"id":"o-2"}}`)))
	wantFailed(t, resp, "m3")
	if b.calls.get("m3") != 0 || b.calls.get("m4") != 1 {
		t.Fatalf("calls m3=%d m4=%d, want 0 and 1", b.calls.get("m3"), b.calls.get("m4"))
	}
	if r := b.record(t, "o-1"); r.MessageID != "m1" || r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("the first message's record changed: %+v", r)
	}
}

// With the default message-ID key the body is not hashed (SQS never gives
// one message ID two bodies); an explicit WithPayloadHash still applies.
func TestMessageIDKeySkipsTheHashUnlessOneIsSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hashed := 0
	countingHash := func(body []byte) (string, error) {
		hashed++
		return "len-" + strconv.Itoa(len(body)), nil
	}

	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts()...)
	if _, err := h(ctx, batch(msg("m1", "body one"))); err != nil {
		t.Fatal(err)
	}
	first := b.record(t, "m1").PayloadHash
	// A copy with another body under the same ID cannot come from SQS; if a
	// caller builds one anyway it is a duplicate, not a conflict.
	resp, _ := h(ctx, batch(msg("m1", "a different body")))
	wantFailed(t, resp)
	if r := b.record(t, "m1"); r.PayloadHash != first || b.calls.get("m1") != 1 {
		t.Fatalf("hash %q -> %q, handler calls %d; want one unchanged record, one call", first, r.PayloadHash, b.calls.get("m1"))
	}

	b = setup(t)
	h = lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithPayloadHash(countingHash))...)
	if _, err := h(ctx, batch(msg("m1", "body one"))); err != nil {
		t.Fatal(err)
	}
	resp, _ = h(ctx, batch(msg("m1", "a different body")))
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.PayloadHash != "len-8" || hashed != 2 || b.calls.get("m1") != 1 {
		t.Fatalf("hash %q, hashed %d times, handler calls %d; want len-8, 2, 1", r.PayloadHash, hashed, b.calls.get("m1"))
	}

	// Any other key hashes by default: an explicit WithKeyMessageID keeps
	// the skip, WithKeyFunc removes it.
	for _, tc := range []struct {
		opts []lambdaidem.Option
		same bool
	}{
		{[]lambdaidem.Option{lambdaidem.WithKeyMessageID()}, true},
		{[]lambdaidem.Option{lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.MessageId, nil })}, false},
	} {
		b = setup(t)
		h = lambdaidem.SQS(b.store, ok, b.opts(tc.opts...)...)
		for _, body := range []string{`{"id":"x"}`, `{"id":"y"}`} {
			if _, err := h(ctx, batch(msg("m-"+body[7:8], body))); err != nil {
				t.Fatal(err)
			}
		}
		if same := b.record(t, "m-x").PayloadHash == b.record(t, "m-y").PayloadHash; same != tc.same {
			t.Errorf("records of two bodies share a hash: %v, want %v", same, tc.same)
		}
	}
}

func TestMissingKeyAndMalformedBodyAreFailedNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("id"), reportsOf(&reps, &mu))...)
	resp, _ := h(context.Background(), batch(msg("m1", `{"other":1}`), msg("m2", `not json`), msg("m3", `{"id":7}`)))
	wantFailed(t, resp, "m1", "m2")
	missing, malformed := reps[0].Records[0], reps[0].Records[1]
	if !errors.Is(missing.Err, lambdaidem.ErrMissingKey) || errors.Is(missing.Err, lambdaidem.ErrMalformedBody) || missing.Outcome != lambdaidem.OutcomeMissingKey {
		t.Errorf("m1 (no id): outcome %s, error %v; want missing_key with ErrMissingKey alone", missing.Outcome, missing.Err)
	}
	if !errors.Is(malformed.Err, lambdaidem.ErrMalformedBody) || !errors.Is(malformed.Err, lambdaidem.ErrMissingKey) || malformed.Outcome != lambdaidem.OutcomeMalformedBody {
		t.Errorf("m2 (not JSON): outcome %s, error %v; want malformed_body with ErrMalformedBody", malformed.Outcome, malformed.Err)
	}
	if b.calls.total() != 1 {
		t.Fatalf("handler ran %d times, want 1 (only m3)", b.calls.total())
	}
	// With a sink, each is dead-lettered with its own reason.
	h = lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink))...)
	resp, _ = h(context.Background(), batch(msg("m5", `{"other":1}`), msg("m6", `{"id":7`)))
	wantFailed(t, resp)
	if got := deadLetterReasons(b.sink); len(got) != 2 || got["m5"] != lambdaidem.ReasonMissingKey || got["m6"] != lambdaidem.ReasonMalformedBody {
		t.Fatalf("dead letters %v, want m5 missing_key and m6 malformed_body", got)
	}
}

// deadLetterReasons maps each dead-lettered message to its reason.
func deadLetterReasons(s *sink) map[string]lambdaidem.Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]lambdaidem.Reason{}
	for _, d := range s.sent {
		out[d.Message.MessageId] = d.Reason
	}
	return out
}

// A body is malformed whichever option has to read it, the key or the
// payload hash, and a key function may say so too; a key function's
// other errors and its panics stay missing keys.
func TestMalformedBodyHasItsOwnReasonWhoeverReadsIt(t *testing.T) {
	t.Parallel()
	byFunc := lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) {
		switch m.Body {
		case "unparsable":
			return "", fmt.Errorf("%w: the producer's format changed", lambdaidem.ErrMalformedBody)
		case "boom":
			panic("unexpected input")
		case "":
			return "", lambdaidem.ErrMissingKey
		}
		return m.Body, nil
	})
	for _, c := range []struct {
		name string
		opts []lambdaidem.Option
		body string
		want lambdaidem.Reason
	}{
		{"hashed field, body not JSON", []lambdaidem.Option{lambdaidem.WithHashJSONFields("x")}, `{"x":`, lambdaidem.ReasonMalformedBody},
		{"hashed field given twice", []lambdaidem.Option{lambdaidem.WithHashJSONFields("x")}, `{"x":1,"x":2}`, lambdaidem.ReasonMalformedBody},
		{"key field, trailing data", []lambdaidem.Option{lambdaidem.WithKeyJSONField("id")}, `{"id":1} {}`, lambdaidem.ReasonMalformedBody},
		{"key field not a scalar", []lambdaidem.Option{lambdaidem.WithKeyJSONField("id")}, `{"id":{}}`, lambdaidem.ReasonMalformedBody},
		{"key field null", []lambdaidem.Option{lambdaidem.WithKeyJSONField("id")}, `{"id":null}`, lambdaidem.ReasonMissingKey},
		{"key function says malformed", []lambdaidem.Option{byFunc}, "unparsable", lambdaidem.ReasonMalformedBody},
		{"key function panics", []lambdaidem.Option{byFunc}, "boom", lambdaidem.ReasonMissingKey},
		{"key function finds no key", []lambdaidem.Option{byFunc}, "", lambdaidem.ReasonMissingKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reps, b := keyReports(t, c.opts, c.body)
			r := reps[0]
			if r.Outcome != lambdaidem.OutcomeDeadLettered || r.Reason != c.want || !errors.Is(r.Err, lambdaidem.ErrMissingKey) {
				t.Errorf("outcome %s, reason %q, error %v; want dead-lettered as %s", r.Outcome, r.Reason, r.Err, c.want)
			}
			if got := errors.Is(r.Err, lambdaidem.ErrMalformedBody); got != (c.want == lambdaidem.ReasonMalformedBody) {
				t.Errorf("errors.Is(%v, ErrMalformedBody) = %v", r.Err, got)
			}
			if got := deadLetterReasons(b.sink)["ma"]; got != c.want {
				t.Errorf("dead-letter copy's reason %q, want %s", got, c.want)
			}
			if n := b.calls.total(); n != 0 {
				t.Errorf("handler ran %d times, want 0", n)
			}
		})
	}
}

// A panicking key function fails only its own record.
func TestPanickingKeyFunctionFailsOnlyItsRecord(t *testing.T) {
	t.Parallel()
	for _, withSink := range []bool{true, false} {
		b := setup(t)
		opts := []lambdaidem.Option{lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) {
			if m.Body == "bad" {
				panic("malformed")
			}
			return m.Body, nil
		})}
		if withSink {
			opts = append(opts, lambdaidem.WithDeadLetterSink(b.sink))
		}
		h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
		resp, err := h(context.Background(), batch(msg("m1", "good"), msg("m2", "bad"), msg("m3", "fine")))
		if err != nil {
			t.Fatal(err)
		}
		if b.calls.get("m1") != 1 || b.calls.get("m3") != 1 {
			t.Fatal("batch-mates of a message whose key function panicked did not run")
		}
		if withSink {
			wantFailed(t, resp)
			if b.sink.reasons()[0] != lambdaidem.ReasonMissingKey || !strings.Contains(b.sink.sent[0].Error, "malformed") {
				t.Fatalf("dead letter %v %q, want missing_key with the panic", b.sink.reasons(), b.sink.sent[0].Error)
			}
		} else {
			wantFailed(t, resp, "m2")
		}
	}
	// The hash function too.
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithPayloadHash(func(body []byte) (string, error) {
		if string(body) == "bad" {
			panic("hash")
		}
		return string(body), nil
	}))...)
	resp, _ := h(context.Background(), batch(msg("m1", "good"), msg("m2", "bad")))
	wantFailed(t, resp, "m2")
}

func TestKeysThatAreNotValidUnicodeAreMalformedNotMerged(t *testing.T) {
	t.Parallel()
	for name, bodies := range map[string][]string{
		"lone surrogates":   {`{"a":{"b":"\ud800"}}`, `{"a":{"b":"\udbff"}}`},
		"lone low one":      {`{"a":{"b":"x\udc00"}}`, `{"a":{"b":"x\udfff"}}`},
		"high then no low":  {`{"a":{"b":"\ud800\u0041"}}`, `{"a":{"b":"\ud800A"}}`},
		"invalid UTF-8":     {"{\"a\":{\"b\":\"\xff\"}}", "{\"a\":{\"b\":\"\xfe\"}}"},
		"encoded surrogate": {"{\"a\":{\"b\":\"\xed\xa0\x80\"}}", "{\"a\":{\"b\":\"\xed\xbf\xbf\"}}"},
		"field given twice": {`{"a":{"b":"1","b":"2"}}`, `{"a":{"b":"2"},"a":{"b":"1"}}`},
		"name not Unicode":  {`{"a":{"\ud800":"1"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := "a.b"
			if name == "name not Unicode" {
				path = "a.\ufffd"
			}
			reps, b := keyReports(t, []lambdaidem.Option{lambdaidem.WithKeyJSONField(path)}, bodies...)
			for i, r := range reps {
				if !errors.Is(r.Err, lambdaidem.ErrMalformedBody) || r.Reason != lambdaidem.ReasonMalformedBody || r.Outcome != lambdaidem.OutcomeDeadLettered {
					t.Errorf("body %d: outcome %s, reason %q, error %v; want dead-lettered as malformed_body with ErrMalformedBody", i, r.Outcome, r.Reason, r.Err)
				}
			}
			if n := b.calls.total(); n != 0 {
				t.Errorf("handler ran %d times, want 0", n)
			}
		})
	}
}

func TestHashedFieldsThatAreNotValidUnicodeAreMalformed(t *testing.T) {
	t.Parallel()
	reps, b := keyReports(t, []lambdaidem.Option{lambdaidem.WithKeyJSONField("id"), lambdaidem.WithHashJSONFields("x")},
		`{"id":"1","x":{"k":"\ud800"}}`, `{"id":"1","x":{"k":"\udbff"}}`, `{"id":"2","x":{"\ud800":1}}`)
	for i, r := range reps {
		if !errors.Is(r.Err, lambdaidem.ErrMalformedBody) || r.Reason != lambdaidem.ReasonMalformedBody {
			t.Errorf("body %d: outcome %s, reason %q, error %v; want malformed_body with ErrMalformedBody", i, r.Outcome, r.Reason, r.Err)
		}
	}
	if n := b.calls.total(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
}

func TestValidEscapesKeyLikeTheCharacters(t *testing.T) {
	t.Parallel()
	reps, b := keyReports(t, []lambdaidem.Option{lambdaidem.WithKeyJSONField("id"), lambdaidem.WithHashJSONFields("id")},
		`{"id":"\ud83d\ude00\u00e9"}`, `{"id":"😀é"}`, `{"id":"\\ud800"}`)
	want := []lambdaidem.Outcome{lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDuplicate, lambdaidem.OutcomeProcessed}
	for i, r := range reps {
		if r.Outcome != want[i] {
			t.Errorf("body %d: outcome %s (%v), want %s", i, r.Outcome, r.Err, want[i])
		}
	}
	if got := b.record(t, `\ud800`).Key; got != `\ud800` {
		t.Errorf("escaped backslash key stored as %q", got)
	}
}

func TestTrailingDataIsMalformed(t *testing.T) {
	t.Parallel()
	reps, b := keyReports(t, []lambdaidem.Option{lambdaidem.WithKeyJSONField("a.b")},
		`{"a":{"b":0}}0`, `000`, `{"a":{"b":1}} {"a":{"b":1}}`, `{"a":{"b":2}}x`)
	for i, r := range reps {
		if !errors.Is(r.Err, lambdaidem.ErrMalformedBody) {
			t.Errorf("body %d: error %v, want ErrMalformedBody", i, r.Err)
		}
	}
	if n := b.calls.total(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
	// Surrounding whitespace is not trailing data.
	reps, _ = keyReports(t, []lambdaidem.Option{lambdaidem.WithKeyJSONField("a.b")}, " \n{\"a\":{\"b\":0}}\n\t")
	if reps[0].Outcome != lambdaidem.OutcomeProcessed || reps[0].Key != "0" {
		t.Errorf("outcome %s, key %q, error %v", reps[0].Outcome, reps[0].Key, reps[0].Err)
	}
}

// The stored form of a hashed key cannot be spelled as a raw key, and keys
// that are not valid UTF-8 are hashed from their bytes: every pair here is
// two keys, two records, two handler runs.
func TestStoredKeysNeverCollide(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", idemstore.MaxKeyLength+1)
	pairs := [][2]string{
		{long, idemstore.StoredKey(long)},
		{"\xff", "\xfe"},
		{"\xff", "\ufffd"},
		{"sha256:x", idemstore.StoredKey("sha256:x")},
	}
	for _, p := range pairs {
		b := setup(t)
		h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }))...)
		resp, _ := h(context.Background(), batch(msg("m1", p[0]), msg("m2", p[1])))
		wantFailed(t, resp)
		if b.calls.get("m1") != 1 || b.calls.get("m2") != 1 {
			t.Errorf("keys %q and %q: handler runs %d and %d, want 1 and 1", p[0], p[1], b.calls.get("m1"), b.calls.get("m2"))
		}
		for _, k := range p {
			sk := idemstore.StoredKey(k)
			if !utf8.ValidString(sk) || len(sk) > idemstore.MaxKeyLength {
				t.Errorf("stored key %q of %q: not a valid short string", sk, k)
			}
			b.record(t, sk)
		}
	}
	if got := idemstore.StoredKey("order-42"); got != "order-42" {
		t.Errorf("StoredKey(order-42) = %q, want it unchanged", got)
	}
}

func TestWrapRefusesInputsThatEncodeAlike(t *testing.T) {
	t.Parallel()
	type in struct{ S string }
	runs := 0
	f := lambdaidem.Wrap(memstore.New(), func(_ context.Context, v in) (string, error) { runs++; return v.S, nil }, lambdaidem.WithNamespace(ns))
	for _, s := range []string{"\xff", "\xfe"} {
		if _, err := f(context.Background(), in{S: s}); !errors.Is(err, lambdaidem.ErrMalformedBody) || !errors.Is(err, lambdaidem.ErrMissingKey) {
			t.Errorf("input %q: error %v, want ErrMalformedBody (an ErrMissingKey)", s, err)
		}
	}
	// A real U+FFFD and a literal backslash-u text are fine, and distinct.
	for _, s := range []string{"\ufffd", `\ufffd`} {
		if got, err := f(context.Background(), in{S: s}); err != nil || got != s {
			t.Errorf("input %q: %q, %v", s, got, err)
		}
	}
	if runs != 2 {
		t.Errorf("ran %d times, want 2", runs)
	}
}

// Wrap's next door to a malformed body: an input with no JSON encoding, or
// whose keyed field is ambiguous, is refused with ErrMalformedBody before
// anything is claimed, and fn never runs.
func TestWrapRefusesMalformedInputs(t *testing.T) {
	t.Parallel()
	type in struct {
		ID  json.RawMessage `json:"id"`
		Amt float64         `json:"amt"`
	}
	store := memstore.New()
	runs := 0
	f := lambdaidem.Wrap(store, func(context.Context, in) (int, error) { runs++; return 1, nil },
		lambdaidem.WithNamespace(ns), lambdaidem.WithKeyJSONField("id.n"))
	for name, v := range map[string]in{
		"no JSON encoding":  {ID: json.RawMessage(`{"n":1}`), Amt: math.NaN()},
		"field given twice": {ID: json.RawMessage(`{"n":1,"n":2}`)},
		"lone surrogate":    {ID: json.RawMessage(`{"n":"\ud800"}`)},
	} {
		if _, err := f(context.Background(), v); !errors.Is(err, lambdaidem.ErrMalformedBody) || !errors.Is(err, lambdaidem.ErrMissingKey) {
			t.Errorf("%s: error %v, want ErrMalformedBody (an ErrMissingKey)", name, err)
		}
	}
	// A missing field is a missing key, not a malformed input.
	if _, err := f(context.Background(), in{ID: json.RawMessage(`{}`)}); !errors.Is(err, lambdaidem.ErrMissingKey) || errors.Is(err, lambdaidem.ErrMalformedBody) {
		t.Errorf("missing field: error %v, want ErrMissingKey alone", err)
	}
	if n := store.Stats().Total(); runs != 0 || n != 0 {
		t.Errorf("fn ran %d times and the store saw %d calls, want none", runs, n)
	}
}

func TestWrapKeysUseTheStoredKeyEncoding(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	long := strings.Repeat("w", idemstore.MaxKeyLength+1)
	runs := 0
	f := lambdaidem.Wrap(st, func(_ context.Context, k string) (string, error) { runs++; return k, nil },
		lambdaidem.WithNamespace(ns), lambdaidem.WithWrapKey(func(k string) (string, error) { return k, nil }))
	for _, k := range []string{long, idemstore.StoredKey(long)} {
		if got, err := f(context.Background(), k); err != nil || got != k {
			t.Fatalf("key %.20q…: %.20q…, %v", k, got, err)
		}
	}
	if runs != 2 {
		t.Errorf("ran %d times, want 2: the long key and its hashed spelling share a record", runs)
	}
}

// A stored result that does not decode into the output type (written by
// hand, or by another version) is an error, never a zero value.
func TestWrapStoredResultThatDoesNotDecodeIsAnError(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ctx := context.Background()
	key := lambdaidem.WithWrapKey(func(k string) (string, error) { return k, nil })
	older := lambdaidem.Wrap(st, func(context.Context, string) (string, error) { return "not a number", nil }, lambdaidem.WithNamespace(ns), key)
	if _, err := older(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	runs := 0
	newer := lambdaidem.Wrap(st, func(context.Context, string) (int, error) { runs++; return 1, nil }, lambdaidem.WithNamespace(ns), key)
	if got, err := newer(ctx, "k"); err == nil || !strings.Contains(err.Error(), "does not decode") || runs != 0 {
		t.Fatalf("replay of an undecodable result = %d, %v (ran %d times); want an error", got, err, runs)
	}
}

// Group and deduplication IDs may both hold "/": group "x" with ID "x/x"
// and group "x/x" with ID "x" are two keys.
func TestPerGroupDedupKeysNeverCollide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyDeduplicationID(true), lambdaidem.WithPayloadHash(func([]byte) (string, error) { return "same", nil }))...)
	m1, m2, m3 := fifo("m1", "x", "{}"), fifo("m2", "x/x", "{}"), fifo("m3", "g", "{}")
	m1.Attributes["MessageDeduplicationId"] = "x/x"
	m2.Attributes["MessageDeduplicationId"] = "x"
	m3.Attributes["MessageDeduplicationId"] = "d"
	resp, _ := h(context.Background(), batch(m1, m2, m3))
	wantFailed(t, resp)
	if b.calls.get("m1") != 1 || b.calls.get("m2") != 1 {
		t.Errorf("handler runs %d and %d, want 1 and 1", b.calls.get("m1"), b.calls.get("m2"))
	}
	// An ordinary group keeps the plain "group/id" key.
	b.record(t, "g/d")
}

// A payload hash that is not valid UTF-8 (from WithPayloadHash) is stored
// hashed from its bytes: it fits any store, and two such hashes still
// conflict instead of passing for one payload.
func TestPayloadHashesThatAreNotUTF8StayApart(t *testing.T) {
	t.Parallel()
	reps, b := keyReports(t, []lambdaidem.Option{
		lambdaidem.WithKeyFunc(func(events.SQSMessage) (string, error) { return "k", nil }),
		lambdaidem.WithPayloadHash(func(body []byte) (string, error) { return string(body), nil }),
	}, "\xff", "\xfe", "\xff")
	want := []lambdaidem.Outcome{lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDeadLettered, lambdaidem.OutcomeDuplicate}
	for i, r := range reps {
		if r.Outcome != want[i] {
			t.Errorf("message %d: %s (%v), want %s", i, r.Outcome, r.Err, want[i])
		}
	}
	if h := b.record(t, "k").PayloadHash; !utf8.ValidString(h) {
		t.Errorf("stored payload hash %q is not valid UTF-8", h)
	}
}
