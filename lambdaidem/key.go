package lambdaidem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/aws/aws-lambda-go/events"
)

// ErrMalformedBody: the key or payload hash needs JSON from a body that is
// not valid JSON. It wraps ErrMissingKey.
var ErrMalformedBody = fmt.Errorf("%w: malformed JSON body", ErrMissingKey)

// MaxKeyLength is the longest key stored as it is; longer keys are stored as
// "sha256:" and the hex digest of the key, so operators can still read short
// keys while the store's key limit is never reached.
const MaxKeyLength = 250

// storedKey returns the key as stored: readable when short, hashed when long.
func storedKey(k string) string {
	if len(k) <= MaxKeyLength {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
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
		v, err := lookupJSON(body, parts)
		if err != nil {
			return "", err
		}
		s, err := scalarString(v)
		if err != nil {
			return "", fmt.Errorf("%w: field %q: %v", ErrMissingKey, path, err)
		}
		return s, nil
	}
}

// lookupJSON decodes body and walks the dotted path.
func lookupJSON(body []byte, parts []string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
	}
	for _, p := range parts {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not inside an object", ErrMissingKey, strings.Join(parts, "."))
		}
		if v, ok = obj[p]; !ok {
			return nil, fmt.Errorf("%w: field %q not found", ErrMissingKey, strings.Join(parts, "."))
		}
	}
	return v, nil
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
			return m.Attributes["MessageGroupId"] + "/" + id, nil
		}
		return id, nil
	}
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
// do not turn duplicates into conflicts. A missing field hashes as null.
func hashJSONFields(paths ...string) HashFunc {
	split := make([][]string, len(paths))
	for i, p := range paths {
		split[i] = strings.Split(p, ".")
	}
	return func(body []byte) (string, error) {
		h := sha256.New()
		for i, parts := range split {
			v, err := lookupJSON(body, parts)
			if errors.Is(err, ErrMalformedBody) {
				return "", err
			}
			if err != nil {
				v = nil
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

// bodyBytes views a message body as bytes without copying it (a 64 KB body
// would otherwise be copied once per record just to be hashed). The bytes
// are only read: by the hash and by the JSON decoder.
func bodyBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
