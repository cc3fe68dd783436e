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

// MaxKeyLength is the longest key stored as it is. Longer keys, and keys
// that could be mistaken for a hashed one, are stored hashed (see
// StoredKey), so operators can still read ordinary keys while the store's
// key limit is never reached.
const MaxKeyLength = 250

// HashedKeyPrefix starts every key stored hashed: "sha256:" and the hex
// SHA-256 digest of the key's bytes.
const HashedKeyPrefix = "sha256:"

// StoredKey returns the form in which a key is stored and shown by the
// operator's tool. A key is stored as it is when it is at most MaxKeyLength
// bytes, valid UTF-8 and does not start with HashedKeyPrefix; any other key
// is stored as HashedKeyPrefix and the hex SHA-256 of its bytes.
//
// The encoding never gives two keys one record (short of a SHA-256
// collision): a key stored as it is never starts with the prefix, so it
// cannot equal a hashed form; two keys stored as they are are equal only if
// the keys are; and two hashed forms are equal only if the digests are. A
// key that is not valid UTF-8 is hashed from its raw bytes, never repaired,
// so two such keys stay apart, and the stored form is always valid UTF-8,
// which DynamoDB requires of a string.
func StoredKey(k string) string {
	if len(k) <= MaxKeyLength && utf8.ValidString(k) && !strings.HasPrefix(k, HashedKeyPrefix) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return HashedKeyPrefix + hex.EncodeToString(sum[:])
}

// storedKey is StoredKey, under the name the decorator uses.
func storedKey(k string) string { return StoredKey(k) }

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

// keyFromJSONField returns a KeyFunc reading a dotted path from the body.
func keyFromJSONField(path string) func([]byte) (string, error) {
	parts := strings.Split(path, ".")
	return func(body []byte) (string, error) {
		raw, err := lookupJSON(body, parts)
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
		s, err := scalarString(v)
		if err != nil {
			return "", fmt.Errorf("%w: field %q: %v", ErrMissingKey, path, err)
		}
		return s, nil
	}
}

// lookupJSON checks that body is exactly one JSON value (trailing data is
// malformed) and returns the raw JSON of the value at the dotted path. A
// member named twice on the path, or whose name is not valid Unicode, is
// malformed: parsers disagree on which one counts.
func lookupJSON(body []byte, parts []string) (json.RawMessage, error) {
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		if err == nil { // json.Valid and Unmarshal disagree: never seen
			err = errors.New("not a single JSON value")
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
	}
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
// obj (already known to be valid JSON), or nil when there is none.
func member(obj json.RawMessage, name string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // '{'
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
		if x == "" {
			return "", errors.New("empty string")
		}
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

// hashJSONFields hashes the canonical JSON of the selected fields, so
// envelopes (SNS, EventBridge) whose ids and timestamps differ per delivery
// do not turn duplicates into conflicts. A missing field hashes as null. A
// selected field holding a string that is not valid Unicode is malformed:
// decoding would replace it with U+FFFD and merge it with other values.
func hashJSONFields(paths ...string) HashFunc {
	split := make([][]string, len(paths))
	for i, p := range paths {
		split[i] = strings.Split(p, ".")
	}
	return func(body []byte) (string, error) {
		h := sha256.New()
		for i, parts := range split {
			raw, err := lookupJSON(body, parts)
			if errors.Is(err, ErrMalformedBody) {
				return "", err
			}
			var v any
			if err == nil {
				if !validUnicode(raw) {
					return "", fmt.Errorf("%w: field %q is not valid Unicode (a lone surrogate or invalid UTF-8)", ErrMalformedBody, paths[i])
				}
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.UseNumber()
				if err := dec.Decode(&v); err != nil {
					return "", fmt.Errorf("%w: field %q: %v", ErrMalformedBody, paths[i], err)
				}
			}
			// encoding/json sorts map keys, so this is canonical.
			b, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("lambdaidem: hash field %q: %w", paths[i], err)
			}
			h.Write([]byte(paths[i]))
			h.Write([]byte{0})
			h.Write(b)
			h.Write([]byte{0})
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
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
