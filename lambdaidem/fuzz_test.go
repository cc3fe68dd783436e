package lambdaidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// fuzzKeyModes are the key options FuzzSQSKeys picks from.
// Each mode says how to read its raw key (raw) or, for JSON keys, the
// path (json), so a duplicate's key can be checked against the first's.
var fuzzKeyModes = []struct {
	opt  lambdaidem.Option
	json string
	raw  func(events.SQSMessage) string
}{
	{lambdaidem.WithKeyMessageID(), "", func(m events.SQSMessage) string { return m.MessageId }},
	{lambdaidem.WithKeyJSONField("a.b"), "a.b", nil},
	{lambdaidem.WithKeyJSONField("id"), "id", nil},
	{lambdaidem.WithKeyAttribute("k"), "", func(m events.SQSMessage) string { return *m.MessageAttributes["k"].StringValue }},
	{lambdaidem.WithKeyDeduplicationID(false), "", func(m events.SQSMessage) string { return m.Attributes["MessageDeduplicationId"] }},
	{lambdaidem.WithKeyDeduplicationID(true), "", func(m events.SQSMessage) string {
		return m.Attributes["MessageGroupId"] + "\x00" + m.Attributes["MessageDeduplicationId"]
	}},
	{lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }), "", func(m events.SQSMessage) string { return m.Body }},
}

// fuzzHashModes are the payload hash options FuzzSQSKeys picks from.
var fuzzHashModes = []lambdaidem.Option{
	nil,
	lambdaidem.WithHashJSONFields("a"),
	lambdaidem.WithHashJSONFields("id", "x.y"),
	lambdaidem.WithPayloadHash(func(b []byte) (string, error) { return string(b), nil }),
}

// FuzzSQSKeys feeds two bodies and the strings of the other key sources
// through the SQS decorator over the in-memory store, with every key and
// payload-hash option, twice (the second time as a redelivery). It checks
// that the failure list is exactly the records not acknowledged; that
// nothing is acknowledged that did not run successfully, was not a
// duplicate of a successful run of the same key, or was not dead-lettered;
// that no stored key runs successfully twice; and that a duplicate's key is
// really the same key, never one that decoded alike.
func FuzzSQSKeys(f *testing.F) {
	for _, seed := range [][4]string{
		{`{"a":{"b":"\ud800"}}`, `{"a":{"b":"\udbff"}}`, "k1", "k2"},
		{`{"a":{"b":0}}0`, `000`, "x", "x"},
		{`{"a":{"b":"1"}}`, `{"a":{"b":1}}`, strings.Repeat("k", 251), "sha256:3b8059c637939a483bdc7beef09f11b566581be6d14e25083b3041b77717de02"},
		{`{"id":"\xff"}`, `{"id":"\xfe"}`, "\xff", "\xfe"},
		{`{"id":7,"x":{"y":[1,2]}}`, `{"x":{"y":[1,2]},"id":7}`, "a", "a"},
		{`!{"id":1}`, `{"id":1,"id":2}`, "", "g"},
		{`{}`, `{}`, "x/x", "x"}, // m1 is group "x" + "x/x", m2 group "x/x" + "x"
	} {
		for mode := range fuzzKeyModes {
			f.Add(seed[0], seed[1], seed[2], seed[3], uint8(mode), uint8(mode%len(fuzzHashModes)))
		}
	}
	f.Fuzz(func(t *testing.T, body1, body2, attr1, attr2 string, keyMode, hashMode uint8) {
		km := fuzzKeyModes[int(keyMode)%len(fuzzKeyModes)]
		opts := []lambdaidem.Option{km.opt}
		if h := fuzzHashModes[int(hashMode)%len(fuzzHashModes)]; h != nil {
			opts = append(opts, h)
		}
		fuzzSQS(t, km.json, km.raw, opts, []events.SQSMessage{
			fuzzMsg("m1", body1, attr1, attr2),
			fuzzMsg("m2", body2, attr2, attr1),
			fuzzMsg("m3", body1, attr1, attr1),
		})
	})
}

func fuzzMsg(id, body, attr, group string) events.SQSMessage {
	m := msg(id, body)
	m.MessageAttributes = map[string]events.SQSMessageAttribute{"k": {DataType: "String", StringValue: &attr}}
	m.Attributes["MessageDeduplicationId"] = attr
	m.Attributes["MessageGroupId"] = group
	return m
}

// fuzzSQS runs recs through a decorator with opts twice and checks what
// FuzzSQSKeys promises. jsonPath is the key's path for the JSON key modes,
// raw reads the raw key for the others.
func fuzzSQS(t *testing.T, jsonPath string, raw func(events.SQSMessage) string, opts []lambdaidem.Option, recs []events.SQSMessage) {
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	ran := map[string]bool{} // message IDs whose handler returned nil
	h := lambdaidem.SQS(b.store, func(_ context.Context, m events.SQSMessage) error {
		if strings.HasPrefix(m.Body, "!") {
			return fmt.Errorf("refused %q", m.Body)
		}
		mu.Lock()
		ran[m.MessageId] = true
		mu.Unlock()
		return nil
	}, b.opts(append(opts, lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu))...)...)

	byID := map[string]events.SQSMessage{}
	for _, m := range recs {
		byID[m.MessageId] = m
	}
	okKey := map[string]string{} // stored key -> message ID of its successful run
	for round := 1; round <= 2; round++ {
		ev := events.SQSEvent{}
		for _, m := range recs {
			m = fuzzCopy(m)
			m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(round)
			ev.Records = append(ev.Records, m)
		}
		resp, _ := h(context.Background(), ev)
		rep := reps[len(reps)-1]
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, r := range rep.Records {
			if failed[r.MessageID] == r.Acked {
				t.Fatalf("round %d: %s acked=%v but in failure list=%v (%s, %v)", round, r.MessageID, r.Acked, failed[r.MessageID], r.Outcome, r.Err)
			}
			if !utf8.ValidString(r.Key) || len(r.Key) > idemstore.MaxKeyLength {
				t.Fatalf("stored key %q is not a valid short string", r.Key)
			}
			if !r.Acked {
				continue
			}
			switch r.Outcome {
			case lambdaidem.OutcomeProcessed:
				if !ran[r.MessageID] {
					t.Fatalf("%s acknowledged as processed, but its handler did not succeed", r.MessageID)
				}
				if prev, dup := okKey[r.Key]; dup && prev != r.MessageID {
					t.Fatalf("key %q ran successfully for %s and again for %s", r.Key, prev, r.MessageID)
				}
				okKey[r.Key] = r.MessageID
			case lambdaidem.OutcomeDuplicate, lambdaidem.OutcomeCachedDuplicate:
				first, seen := okKey[r.Key]
				if !seen {
					t.Fatalf("%s acknowledged as a duplicate of key %q, which never ran successfully", r.MessageID, r.Key)
				}
				sameKey(t, jsonPath, raw, byID[first], byID[r.MessageID])
			case lambdaidem.OutcomeDeadLettered, lambdaidem.OutcomeDeadLetteredDuplicate:
				if !b.sink.has(r.MessageID) && r.Outcome == lambdaidem.OutcomeDeadLettered {
					t.Fatalf("%s acknowledged as dead-lettered, but no copy was sent", r.MessageID)
				}
			default:
				t.Fatalf("%s acknowledged with outcome %s (%v)", r.MessageID, r.Outcome, r.Err)
			}
		}
	}
}

func fuzzCopy(m events.SQSMessage) events.SQSMessage {
	attrs := map[string]string{}
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	m.Attributes = attrs
	return m
}

// sameKey fails unless two messages acknowledged as one key really carry
// one key. For JSON keys it decodes with encoding/json, which replaces what
// is not valid Unicode with U+FFFD: a key holding U+FFFD only counts as the
// same when the bodies spell it the same way.
func sameKey(t *testing.T, jsonPath string, raw func(events.SQSMessage) string, a, b events.SQSMessage) {
	t.Helper()
	if a.MessageId == b.MessageId {
		return
	}
	if raw != nil {
		if ka, kb := raw(a), raw(b); ka != kb {
			t.Fatalf("%s (key %q) acknowledged as a duplicate of %s (key %q)", b.MessageId, kb, a.MessageId, ka)
		}
		return
	}
	ka, kb := refKey(a.Body, jsonPath), refKey(b.Body, jsonPath)
	if ka != kb {
		t.Fatalf("%s (key %q) acknowledged as a duplicate of %s (key %q)", b.MessageId, kb, a.MessageId, ka)
	}
	if strings.ContainsRune(ka, utf8.RuneError) && a.Body != b.Body {
		t.Fatalf("%s acknowledged as a duplicate of %s, but their keys only decode alike: %q and %q", b.MessageId, a.MessageId, a.Body, b.Body)
	}
}

// refKey decodes the key with encoding/json, loosely: a reference only.
func refKey(body, path string) string {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "\x00undecodable"
	}
	for _, p := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return "\x00absent"
		}
		v = obj[p]
	}
	return fmt.Sprint(v)
}

func (s *sink) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.sent {
		if d.Message.MessageId == id {
			return true
		}
	}
	return false
}
