package lambdaidem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/aws/aws-lambda-go/events"
)

// rawHashPrefix marks a payload hash that was not valid UTF-8 and is
// stored as the hex SHA-256 of its bytes instead.
const rawHashPrefix = "sha256-of-bytes:"

// storedHash returns the payload hash as stored: unchanged when it is valid
// UTF-8 (every built-in hash is hex), else hashed from its bytes so that a
// store that keeps strings (DynamoDB refuses invalid UTF-8) can hold it. A
// hash that happens to start with the marker is hashed as well, so no two
// hashes are stored alike.
func storedHash(h string) string {
	if utf8.ValidString(h) && !strings.HasPrefix(h, rawHashPrefix) {
		return h
	}
	sum := sha256.Sum256([]byte(h))
	return rawHashPrefix + hex.EncodeToString(sum[:])
}

// KeyFunc derives an idempotency key from an SQS message.
type KeyFunc func(events.SQSMessage) (string, error)

// keyFromMessageID is the default: SQS's own message ID (catches SQS
// redeliveries, not producer duplicates).
func keyFromMessageID(m events.SQSMessage) (string, error) {
	if m.MessageId == "" {
		return "", fmt.Errorf("%w: empty messageId", ErrMissingKey)
	}
	return m.MessageId, nil
}

// jsonKeyField reads a key from a dotted path of a JSON body.
type jsonKeyField struct {
	path  string
	parts []string
}

func newJSONKeyField(path string) *jsonKeyField {
	return &jsonKeyField{path: path, parts: strings.Split(path, ".")}
}

// key reads the key from body.
func (f *jsonKeyField) key(body []byte) (string, error) {
	if err := checkJSON(body); err != nil {
		return "", err
	}
	return f.keyIn(body)
}

// keyIn reads the key from body, already known to be one JSON value.
func (f *jsonKeyField) keyIn(body []byte) (string, error) {
	raw, err := lookupJSON(body, f.parts)
	if err != nil {
		return "", err
	}
	if !validUnicode(raw) {
		return "", fmt.Errorf("%w: field %q is not valid Unicode (a lone surrogate or invalid UTF-8)", ErrMalformedBody, f.path)
	}
	if s, ok := plainScalar(raw); ok {
		if s == "" {
			return "", fmt.Errorf("%w: field %q: empty string", ErrMissingKey, f.path)
		}
		return s, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, f.path, err)
	}
	if v == nil {
		return "", fmt.Errorf("%w: field %q is null", ErrMissingKey, f.path)
	}
	s, err := scalarString(v)
	if err != nil {
		return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, f.path, err)
	}
	if s == "" {
		return "", fmt.Errorf("%w: field %q: empty string", ErrMissingKey, f.path)
	}
	return s, nil
}

// plainScalar returns what a JSON string without escapes, or a number,
// decodes to (the text of the number, as json.Number keeps it), without a
// decoder; ok is false for anything else.
func plainScalar(raw []byte) (string, bool) {
	switch c := raw[0]; {
	case c == '"':
		in := raw[1 : len(raw)-1]
		if bytes.IndexByte(in, '\\') >= 0 {
			return "", false
		}
		return string(in), true
	case c == '-' || c >= '0' && c <= '9':
		return string(raw), true
	}
	return "", false
}

// checkJSON checks that body is exactly one JSON value (trailing data is
// malformed).
func checkJSON(body []byte) error {
	if json.Valid(body) {
		return nil
	}
	var v any
	err := json.Unmarshal(body, &v)
	if err == nil { // json.Valid and Unmarshal disagree: never seen
		err = errors.New("not a single JSON value")
	}
	return fmt.Errorf("%w: %v", ErrMalformedBody, err)
}

// lookupJSON returns the raw JSON of the value at the dotted path of body,
// which checkJSON accepted. A member named twice on the path, or whose
// name is not valid Unicode, is malformed: parsers disagree on which one
// counts.
func lookupJSON(body []byte, parts []string) (json.RawMessage, error) {
	raw := json.RawMessage(bytes.TrimSpace(body))
	for i, p := range parts {
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("%w: %q is not inside an object", ErrMissingKey, strings.Join(parts[:i+1], "."))
		}
		v, err := member(raw, p)
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

// member returns the raw value of the member called name in the JSON object
// obj (valid JSON, starting with '{'), or nil when there is none. It scans
// the object once, skipping the values of other members without decoding
// them.
func member(obj json.RawMessage, name string) (json.RawMessage, error) {
	var found json.RawMessage
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		n := i
		i = skipString(obj, i)
		rawName := obj[n:i]
		i = skipSpace(obj, skipSpace(obj, i)+1) // past ':'
		v := i
		i = skipValue(obj, i)
		value := obj[v:i]
		i = skipSpace(obj, i)
		if !memberNamed(rawName, name) {
			continue
		}
		switch {
		case !validUnicode(rawName):
			return nil, errors.New("member name is not valid Unicode")
		case found != nil:
			return nil, errors.New("given twice")
		}
		found = value
	}
	return found, nil
}

// memberNamed reports whether the JSON string raw (quotes included)
// decodes to name, as encoding/json decodes it (what is not valid Unicode
// becoming U+FFFD).
func memberNamed(raw []byte, name string) bool {
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in) == name
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == name
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i, in
// valid JSON.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number or a literal: it runs to the next delimiter.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// validUnicode reports whether every string in the valid JSON text raw
// (values and member names) is valid Unicode: no invalid UTF-8 bytes and no
// \u escape of a lone surrogate. encoding/json replaces both with U+FFFD
// while decoding, which would make different inputs decode alike.
func validUnicode(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case !in:
			in = c == '"'
			i++
		case c == '"':
			in = false
			i++
		case c == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			r := hex4(raw[i+2:])
			i += 6
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low must follow
				if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return false
				}
				if lo := hex4(raw[i+2:]); lo < 0xdc00 || lo > 0xdfff {
					return false
				}
				i += 6
			case utf16.IsSurrogate(r): // a low one alone
				return false
			}
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape (valid JSON, so present).
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

// scalarString renders a JSON string or number as a key.
func scalarString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return fmt.Sprint(x), nil
	default:
		return "", fmt.Errorf("not a string or number (%T)", v)
	}
}

// keyFromAttribute reads a String (or Number) message attribute.
func keyFromAttribute(name string) KeyFunc {
	return func(m events.SQSMessage) (string, error) {
		a, ok := m.MessageAttributes[name]
		if !ok || a.StringValue == nil || *a.StringValue == "" {
			return "", fmt.Errorf("%w: message attribute %q absent or empty", ErrMissingKey, name)
		}
		return *a.StringValue, nil
	}
}

// keyFromDedupID reads a FIFO message's MessageDeduplicationId; with
// perGroup, the group is part of the key (high-throughput FIFO queues scope
// deduplication to the message group).
func keyFromDedupID(perGroup bool) KeyFunc {
	return func(m events.SQSMessage) (string, error) {
		id := m.Attributes["MessageDeduplicationId"]
		if id == "" {
			return "", fmt.Errorf("%w: no MessageDeduplicationId (not a FIFO message?)", ErrMissingKey)
		}
		if perGroup {
			return groupKey(m.Attributes["MessageGroupId"], id), nil
		}
		return id, nil
	}
}

// groupKey joins a message group and a deduplication ID into one key that
// no other pair gives. Both may hold "/", so "a/b"+"c" and "a"+"b/c" must
// not both become "a/b/c": a group holding "/" (or starting with a quote)
// is written Go-quoted. Quoted text ends at its first unescaped quote, and
// an unquoted group runs to the first "/", so the pair can always be read
// back. Every other group keeps the plain "group/id" form.
func groupKey(group, id string) string {
	if strings.Contains(group, "/") || strings.HasPrefix(group, `"`) {
		group = strconv.Quote(group)
	}
	return group + "/" + id
}

// HashFunc computes the payload hash of a body (SQS) or of the JSON input
// (Wrap). Two messages with one key and different hashes conflict. It must
// not modify or keep body: for SQS it shares the message's memory.
type HashFunc func(body []byte) (string, error)

// hashBody is the default payload hash: SHA-256 of the whole body.
func hashBody(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// jsonHashFields hashes the canonical JSON of the selected fields, so
// envelopes (SNS, EventBridge) whose ids and timestamps differ per delivery
// do not turn duplicates into conflicts. A missing field hashes as null. A
// selected field holding a string that is not valid Unicode is malformed:
// decoding would replace it with U+FFFD and merge it with other values.
type jsonHashFields struct {
	paths []string
	split [][]string
}

func newJSONHashFields(paths ...string) *jsonHashFields {
	h := &jsonHashFields{paths: paths, split: make([][]string, len(paths))}
	for i, p := range paths {
		h.split[i] = strings.Split(p, ".")
	}
	return h
}

// hash is the HashFunc.
func (f *jsonHashFields) hash(body []byte) (string, error) {
	if err := checkJSON(body); err != nil {
		return "", err
	}
	return f.hashIn(body)
}

// hashIn hashes body, already known to be one JSON value.
func (f *jsonHashFields) hashIn(body []byte) (string, error) {
	h := sha256.New()
	for i, parts := range f.split {
		raw, err := lookupJSON(body, parts)
		if errors.Is(err, ErrMalformedBody) {
			return "", err
		}
		canon := []byte("null")
		if err == nil {
			if !validUnicode(raw) {
				return "", fmt.Errorf("%w: field %q is not valid Unicode (a lone surrogate or invalid UTF-8)", ErrMalformedBody, f.paths[i])
			}
			if canon, err = canonicalJSON(raw); err != nil {
				return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, f.paths[i], err)
			}
		}
		h.Write([]byte(f.paths[i]))
		h.Write([]byte{0})
		h.Write(canon)
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}

// canonicalJSON is what json.Marshal writes for the value raw decodes to
// (numbers kept as written): map keys sorted, strings escaped its way. A
// number, a literal, or a string that json.Marshal would write unchanged
// is its own canonical form and is not decoded.
func canonicalJSON(raw []byte) ([]byte, error) {
	switch c := raw[0]; {
	case c == '-' || c >= '0' && c <= '9', c == 't', c == 'f', c == 'n':
		return raw, nil
	case c == '"' && marshalsUnchanged(raw[1:len(raw)-1]):
		return raw, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// encoding/json sorts map keys, so this is canonical.
	return json.Marshal(v)
}

// marshalsUnchanged reports whether json.Marshal writes the string s
// (valid UTF-8) back as s: no escape in it, and nothing json.Marshal
// escapes (control characters, <, >, &, U+2028, U+2029).
func marshalsUnchanged(s []byte) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '\\', c == '"', c == '<', c == '>', c == '&':
			return false
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			return false
		}
	}
	return true
}

// checkEncodedInput refuses a JSON encoding made by json.Marshal that holds
// a string which was not valid UTF-8: the encoder writes such bytes as the
// escape \ufffd (a real U+FFFD is written as itself), so two different
// inputs would encode, and be keyed and hashed, alike.
func checkEncodedInput(b []byte) error {
	for i := 0; i+6 <= len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if string(b[i:i+6]) == `\ufffd` {
			return fmt.Errorf("%w: the input holds a string that is not valid UTF-8", ErrMalformedBody)
		}
		i++ // skip the escaped character, so "\\ufffd" is not taken for one
	}
	return nil
}

// bodyBytes views a message body as bytes without copying it (a 64 KB body
// would otherwise be copied once per record just to be hashed). The bytes
// are only read: by the hash and by the JSON decoder.
func bodyBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// MessageIDHash is the payload hash of an SQS record keyed by its message
// ID with no WithPayloadHash set: a constant, since SQS never gives one
// message ID two bodies. Tools that write records as the decorator would
// (tests, benchmarks) use it.
const MessageIDHash = "none:message-id"
