package httpidem

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseKey reads arbitrary Idempotency-Key field values: a key it
// accepts is non-empty, within the limit, printable ASCII, and comes back
// unchanged from its own Structured Field String form.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `abc`, `"a\"b\\c"`, `"a", "b"`, `a,b`, `"unterminated`,
		`"bad\escape"`, "\"\x7f\"", " \t\"k\"\t ", `""`, "\"\xff\"", "k\x00", `"\u00e9"`, strings.Repeat("k", 300),
	} {
		f.Add(s, 255)
	}
	f.Fuzz(func(t *testing.T, value string, maxLen int) {
		key, err := ParseKey(value, maxLen)
		if err != nil {
			return
		}
		if key == "" || (maxLen > 0 && len(key) > maxLen) {
			t.Fatalf("ParseKey(%q, %d) = %q", value, maxLen, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q holds byte %#x", value, key, key[i])
			}
		}
		sf := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if back, err := ParseKey(sf, maxLen); err != nil || back != key {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q back", sf, back, err, key)
		}
	})
}

// FuzzStoreKey: two requests share a stored key only when route, caller
// and key are all the same.
func FuzzStoreKey(f *testing.F) {
	f.Add("POST /orders", "sub:alice", "k1", "POST /orders", "sub:alice\" \"x", "k1")
	f.Add("a\" \"b", "c", "k", "a", "b\" \"c", "k")
	f.Add("r", "c", "k k", "r", "c k", "k")
	f.Add("\xff", "", "k", "\xfe", "", "k")
	f.Fuzz(func(t *testing.T, r1, c1, k1, r2, c2, k2 string) {
		for _, k := range []*string{&k1, &k2} {
			key, err := ParseKey(*k, 0)
			if err != nil {
				return
			}
			*k = key
		}
		if storeKey(r1, c1, k1) == storeKey(r2, c2, k2) && (r1 != r2 || c1 != c2 || k1 != k2) {
			t.Fatalf("(%q, %q, %q) and (%q, %q, %q) share stored key %q", r1, c1, k1, r2, c2, k2, storeKey(r1, c1, k1))
		}
	})
}

// FuzzFingerprint: two requests hash alike (their fingerprints' JSON
// encodings are equal) only when method, path, body and encoding flag are
// all the same, whatever bytes the path holds.
func FuzzFingerprint(f *testing.F) {
	f.Add("POST", "/orders", "{}", false, "POST", "/orders", "{}", true)
	f.Add("POST", "/o\xff", "", false, "POST", "/o\xfe", "", false)
	f.Add("POST", "/o\ufffd", "", false, "POST", "/o\xff", "", false)
	f.Add("P\xffST", "/", "", false, "P\xfeST", "/", "", false)
	f.Fuzz(func(t *testing.T, m1, p1, b1 string, e1 bool, m2, p2, b2 string, e2 bool) {
		j1, err1 := json.Marshal(newFingerprint(m1, p1, b1, e1))
		j2, err2 := json.Marshal(newFingerprint(m2, p2, b2, e2))
		if err1 != nil || err2 != nil {
			t.Fatalf("encode: %v, %v", err1, err2)
		}
		if string(j1) == string(j2) && (m1 != m2 || p1 != p2 || b1 != b2 || e1 != e2) {
			t.Fatalf("(%q %q) and (%q %q) hash alike: %s", m1, p1, m2, p2, j1)
		}
		if strings.Contains(string(j1), `\ufffd`) {
			t.Fatalf("encoding %s lost bytes (Wrap refuses such an input)", j1)
		}
	})
}
