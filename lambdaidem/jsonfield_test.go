package lambdaidem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The JSON field readers scan the body themselves instead of decoding it
// with encoding/json once per field. These tests hold them to what the
// decoder-based readers they replaced returned, byte for byte and error
// for error: refLookup, refMember, refKey and refHash below are those
// readers.

func refLookup(body []byte, parts []string) (json.RawMessage, error) {
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		if err == nil {
			err = errors.New("not a single JSON value")
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
	}
	raw := json.RawMessage(bytes.TrimSpace(body))
	for i, p := range parts {
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("%w: %q is not inside an object", ErrMissingKey, strings.Join(parts[:i+1], "."))
		}
		v, err := refMember(raw, p)
		if err != nil {
			return nil, fmt.Errorf("%w: field %q: %v", ErrMalformedBody, strings.Join(parts[:i+1], "."), err)
		}
		if v == nil {
			return nil, fmt.Errorf("%w: field %q not found", ErrMissingKey, strings.Join(parts[:i+1], "."))
		}
		raw = v
	}
	return raw, nil
}

func refMember(obj json.RawMessage, name string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var found json.RawMessage
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		rawName := bytes.TrimLeft(obj[start:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if tok != name {
			continue
		}
		switch {
		case !validUnicode(rawName):
			return nil, errors.New("member name is not valid Unicode")
		case found != nil:
			return nil, errors.New("given twice")
		}
		found = v
	}
	return found, nil
}

func refKey(body []byte, path string) (string, error) {
	raw, err := refLookup(body, strings.Split(path, "."))
	if err != nil {
		return "", err
	}
	if !validUnicode(raw) {
		return "", fmt.Errorf("%w: field %q is not valid Unicode (a lone surrogate or invalid UTF-8)", ErrMalformedBody, path)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, path, err)
	}
	if v == nil {
		return "", fmt.Errorf("%w: field %q is null", ErrMissingKey, path)
	}
	s, err := scalarString(v)
	if err != nil {
		return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, path, err)
	}
	if s == "" {
		return "", fmt.Errorf("%w: field %q: empty string", ErrMissingKey, path)
	}
	return s, nil
}

func refHash(body []byte, paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		raw, err := refLookup(body, strings.Split(p, "."))
		if errors.Is(err, ErrMalformedBody) {
			return "", err
		}
		var v any
		if err == nil {
			if !validUnicode(raw) {
				return "", fmt.Errorf("%w: field %q is not valid Unicode (a lone surrogate or invalid UTF-8)", ErrMalformedBody, p)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, p, err)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("lambdaidem: hash field %q: %w", p, err)
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sameResult fails unless two readers agree on the value and the error.
func sameResult(t *testing.T, what, got, want string, gotErr, wantErr error) {
	t.Helper()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || got != want {
		t.Fatalf("%s: got %q, %v; the decoder-based reader gives %q, %v", what, got, gotErr, want, wantErr)
	}
	for _, target := range []error{ErrMalformedBody, ErrMissingKey} {
		if errors.Is(gotErr, target) != errors.Is(wantErr, target) {
			t.Fatalf("%s: error %v and the decoder-based %v disagree on %v", what, gotErr, wantErr, target)
		}
	}
}

// checkJSONFields compares every reader on one body and path.
func checkJSONFields(t *testing.T, body, path string) {
	t.Helper()
	b := []byte(body)
	parts := strings.Split(path, ".")
	var raw json.RawMessage
	err := checkJSON(b)
	if err == nil {
		raw, err = lookupJSON(b, parts)
	}
	wantRaw, wantErr := refLookup(b, parts)
	sameResult(t, fmt.Sprintf("lookup %q in %q", path, body), string(raw), string(wantRaw), err, wantErr)

	key, err := newJSONKeyField(path).key(b)
	wantKey, wantErr := refKey(b, path)
	sameResult(t, fmt.Sprintf("key %q of %q", path, body), key, wantKey, err, wantErr)

	for _, paths := range [][]string{{path}, {path, "z"}, {"z", path, path + ".q"}} {
		hash, err := newJSONHashFields(paths...).hash(b)
		wantHash, wantErr := refHash(b, paths...)
		sameResult(t, fmt.Sprintf("hash %q of %q", paths, body), hash, wantHash, err, wantErr)
	}
}

var jsonFieldSeeds = []struct{ body, path string }{
	{`{"id":"a"}`, "id"},
	{` {"id" : 7 , "x":1}  `, "id"},
	{`{"a":{"b":"\u00e9\ud83d\ude00"}}`, "a.b"},
	{`{"a":{"b":"\ud800"}}`, "a.b"},
	{`{"a":{"b":"\udc00x"}}`, "a.b"},
	{"{\"id\":\"\xff\"}", "id"},
	{"{\"\xff\":1,\"\xfe\":2}", "\ufffd"},
	{`{"\u0069d":1}`, "id"},
	{`{"id":1,"id":2}`, "id"},
	{`{"id":1,"\u0069d":2}`, "id"},
	{`{"id":1} {}`, "id"},
	{`{"id":`, "id"},
	{`not json`, "id"},
	{`[1,2]`, "id"},
	{`{"a":[{"b":1}],"b":{"c":"]}\"\\"},"id":-1.5e3}`, "id"},
	{`{"a":[{"b":1}],"b":{"c":"]}\"\\"},"id":-1.5e3}`, "b.c"},
	{`{"a":{"b":{"c":{}}}}`, "a.b.c"},
	{`{"a":{"b":{"c":[]}}}`, "a.b"},
	{`{"id":""}`, "id"},
	{`{"id":null}`, "id"},
	{`{"id":true,"z":false}`, "id"},
	{`{"id":"<a&b>\u2028","z":"x\"y"}`, "z"},
	{"{\"id\":\"\u2028\u2029<>&\"}", "id"},
	{`{"id":{"y":1,"x":[1,"\u00e9",{"b":2,"a":1}]}}`, "id"},
	{"{\"id\":\"a\\/b\",\"q\":\t\n\r 1}", "id"},
	{`{"":1}`, ""},
	{`{"a.b":1}`, "a.b"},
	{`{}`, "id"},
	{`"id"`, "id"},
}

func TestJSONFieldsMatchTheDecoder(t *testing.T) {
	for _, s := range jsonFieldSeeds {
		checkJSONFields(t, s.body, s.path)
	}
}

// FuzzJSONFields holds the scanning readers to the decoder-based ones on
// any body and path.
func FuzzJSONFields(f *testing.F) {
	for _, s := range jsonFieldSeeds {
		f.Add(s.body, s.path)
	}
	f.Fuzz(func(t *testing.T, body, path string) {
		checkJSONFields(t, body, path)
	})
}

// BenchmarkJSONKeyAndHash reads a key field and hashes two fields of a
// 1 KB body: with the decoder-based readers the scanning ones replaced
// (decoder), and as an SQS record does now (scan: the body checked once).
func BenchmarkJSONKeyAndHash(b *testing.B) {
	body := []byte(`{"detail-type":"order","time":"2026-11-26T17:00:00Z","detail":{"order":{"id":"o-12345","amount":42.5,` +
		`"lines":[` + strings.Repeat(`{"sku":"abc","qty":1,"note":"\u00e9t\u00e9"},`, 18) + `{"sku":"z","qty":2}]}},"id":"e-1"}`)
	const keyPath = "detail.order.id"
	hashPaths := []string{"detail.order.id", "detail.order.amount"}
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := refKey(body, keyPath); err != nil {
				b.Fatal(err)
			}
			if _, err := refHash(body, hashPaths...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		k, h := newJSONKeyField(keyPath), newJSONHashFields(hashPaths...)
		b.ReportAllocs()
		for b.Loop() {
			if err := checkJSON(body); err != nil {
				b.Fatal(err)
			}
			if _, err := k.keyIn(body); err != nil {
				b.Fatal(err)
			}
			if _, err := h.hashIn(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
