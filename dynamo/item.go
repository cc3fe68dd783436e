package dynamo

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/internal/storeutil"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Stored attribute names. The table in doc.go is their documentation; keep
// the two in step.
const (
	attrPK           = "pk"
	attrSchema       = "schema_version"
	attrStatus       = "status"
	attrToken        = "lease_token"
	attrLeaseUntil   = "lease_until"
	attrAttempts     = "attempts"
	attrTakeovers    = "takeovers"
	attrGeneration   = "generation"
	attrClaim        = "claim"
	attrHash         = "payload_hash"
	attrMessageID    = "message_id"
	attrResult       = "result"
	attrResultUntil  = "result_until"
	attrExpiresAt    = "expires_at"
	attrLastError    = "last_error"
	attrDLReason     = "dead_letter_reason"
	attrDLSourceID   = "dead_lettered_message_id"
	attrDLCopyID     = "dead_letter_message_id"
	attrFirstAttempt = "first_attempt_at"
	attrUpdatedAt    = "updated_at"
	attrOpenStatus   = "open_status"
	attrRedrives     = "redrives"
	attrRedrivenFrom = "redriven_from"
	attrResultApart  = "result_apart"
	attrRecord       = "record"
	// attrResolution and attrResolutionNote hold an operator's decision on
	// an unknown outcome (idemstore.Admin.Resolve).
	attrResolution     = "resolution"
	attrResolutionNote = "resolution_note"
)

// Limits of DynamoDB that the store checks before sending, so that callers
// get a named error instead of a ValidationException.
const (
	// maxPKBytes is DynamoDB's limit on a partition key value.
	maxPKBytes = 2048
	// maxItemBytes is DynamoDB's limit on an item (400 KB).
	maxItemBytes = 400 * 1024
	// maxFieldBytes bounds the caller-supplied strings that stay on the item
	// (payload hash, message IDs, reason), so the item size has a known
	// bound apart from the result and last_error.
	maxFieldBytes = 1024
	// itemOverheadBytes bounds everything on an item that is neither the
	// key, the caller strings, last_error nor the result: attribute names,
	// numbers, token, generation and status values. Counted generously.
	itemOverheadBytes = 2048
)

// pkOf builds the partition key "namespace#key". The namespace may not
// contain "#", so the split back is unambiguous (the key may).
func pkOf(namespace, key string) (string, error) {
	switch {
	case namespace == "":
		return "", fmt.Errorf("%w: empty namespace", ErrInvalidKey)
	case key == "":
		return "", fmt.Errorf("%w: %w (namespace %q)", ErrInvalidKey, idemstore.ErrMissingKey, namespace)
	case strings.Contains(namespace, "#"):
		return "", fmt.Errorf("%w: namespace %q contains '#'", ErrInvalidKey, namespace)
	case !utf8.ValidString(namespace) || !utf8.ValidString(key):
		// DynamoDB refuses such strings; the decorator never sends one (it
		// stores such keys hashed, see idemstore.StoredKey).
		return "", fmt.Errorf("%w: namespace %q or key %q is not valid UTF-8", ErrInvalidKey, namespace, key)
	}
	pk := namespace + "#" + key
	if len(pk) > maxPKBytes {
		return "", fmt.Errorf("%w: namespace and key are %d bytes, over DynamoDB's %d-byte key limit (hash long keys before calling)", ErrInvalidKey, len(pk), maxPKBytes)
	}
	return pk, nil
}

// checkField rejects a caller string that would make the item's size
// unbounded.
func checkField(name, v string) error {
	if len(v) > maxFieldBytes {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrInvalidKey, name, len(v), maxFieldBytes)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidKey, name, v)
	}
	return nil
}

// Time is stored rounded up, never down: a record is kept at least as long
// as asked and a lease never ends earlier than granted. Conditions compare
// against "now" rounded up the same way (see nowSecs and cutoffMillis).

func ceilMillis(t time.Time) int64 { return storeutil.CeilMillis(t) }

func ceilSecs(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func numAV(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func strAV(v string) types.AttributeValue {
	return &types.AttributeValueMemberS{Value: v}
}

func keyOf(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: strAV(pk)}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
// Bytes that are not valid UTF-8 (an error text may quote a message body)
// become U+FFFD first: DynamoDB refuses such strings, and a failure that
// cannot be recorded would fail again on every delivery.
func truncate(s string, n int) string {
	return storeutil.Truncate(strings.ToValidUTF8(s, "\uFFFD"), n)
}

// item is a stored record as DynamoDB returns it.
type item map[string]types.AttributeValue

func (it item) str(name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// num returns a number attribute, and whether it is present.
func (it item) num(name string) (int64, bool) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func (it item) millis(name string) time.Time {
	if n, ok := it.num(name); ok {
		return time.UnixMilli(n).UTC()
	}
	return time.Time{}
}

func (it item) secs(name string) time.Time {
	if n, ok := it.num(name); ok {
		return time.Unix(n, 0).UTC()
	}
	return time.Time{}
}

// expiredAt reports whether the item counts as absent at now, with the same
// rounding as the conditions use.
func (it item) expiredAt(now time.Time) bool {
	e, ok := it.num(attrExpiresAt)
	return ok && e < ceilSecs(now)
}

// leaseExpiredAt reports whether the lease may be taken over, with the same
// rounding as the takeover condition.
func (it item) leaseExpiredAt(now time.Time, grace time.Duration) bool {
	lu, _ := it.num(attrLeaseUntil)
	return lu < ceilMillis(now.Add(-grace))
}

// record decodes a stored item. Missing attributes decode as zero values.
func (it item) record() idemstore.Record {
	ns, key, _ := strings.Cut(it.str(attrPK), "#")
	n := func(name string) int {
		v, _ := it.num(name)
		return int(v)
	}
	claim, _ := it.num(attrClaim)
	var result []byte
	if v, ok := it[attrResult].(*types.AttributeValueMemberB); ok {
		result = v.Value
	}
	return idemstore.Record{
		Namespace:             ns,
		Key:                   key,
		SchemaVersion:         n(attrSchema),
		Status:                idemstore.Status(it.str(attrStatus)),
		LeaseToken:            it.str(attrToken),
		LeaseUntil:            it.millis(attrLeaseUntil),
		Attempts:              n(attrAttempts),
		Takeovers:             n(attrTakeovers),
		Fence:                 idemstore.Fence{Generation: it.str(attrGeneration), Claim: claim},
		PayloadHash:           it.str(attrHash),
		MessageID:             it.str(attrMessageID),
		Result:                result,
		ResultUntil:           it.secs(attrResultUntil),
		ExpiresAt:             it.secs(attrExpiresAt),
		LastError:             it.str(attrLastError),
		DeadLetterReason:      idemstore.Reason(it.str(attrDLReason)),
		DeadLetteredMessageID: it.str(attrDLSourceID),
		DeadLetterMessageID:   it.str(attrDLCopyID),
		FirstAttemptAt:        it.millis(attrFirstAttempt),
		UpdatedAt:             it.millis(attrUpdatedAt),
		Redrives:              n(attrRedrives),
		RedrivenFrom:          it.str(attrRedrivenFrom),
		Resolution:            idemstore.Resolution(it.str(attrResolution)),
		ResolutionNote:        it.str(attrResolutionNote),
	}
}

// avSize estimates the stored size of a value the way DynamoDB bills it,
// rounding up where the exact rule is fiddly (numbers, containers).
func avSize(av types.AttributeValue) int {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value) + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s) + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + avSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + mapSize(v.Value)
	}
	return 0
}

// mapSize estimates the size of an item or a map of values: names plus
// values.
func mapSize(m map[string]types.AttributeValue) int {
	n := 0
	for k, v := range m {
		n += len(k) + 1 + avSize(v)
	}
	return n
}
