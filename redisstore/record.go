package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/storeutil"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The fields of a record's hash; the package documentation lists them with
// their meaning. Short, because every claim returns them all.
const (
	fSchema       = "v"
	fStatus       = "s"
	fToken        = "t"
	fLeaseUntil   = "lu"
	fAttempts     = "a"
	fTakeovers    = "to"
	fGeneration   = "g"
	fClaim        = "c"
	fHash         = "h"
	fMessageID    = "m"
	fResult       = "r"
	fResultUntil  = "ru"
	fExpiresAt    = "ea"
	fLastError    = "e"
	fDLReason     = "dr"
	fDLSourceID   = "ds"
	fDLCopyID     = "dc"
	fFirst        = "fa"
	fUpdated      = "ua"
	fResultApart  = "rl"
	fRedrives     = "rd"
	fRedrivenFrom = "rf"
	// fResolution and fResolutionNote hold an operator's decision on an
	// unknown outcome (idemstore.Admin.Resolve).
	fResolution     = "rv"
	fResolutionNote = "rn"
)

// keys names the keys of one record: its hash, its namespace's open sets
// and the string that holds a large result apart, all with the namespace
// as hash tag.
type keys struct {
	record string
	open   [3]string // IN_PROGRESS, FAILED, DEAD_LETTERED
	result string    // a result larger than WithInlineResultBytes
	member string    // the record's member in the open sets: its key
}

// all is the KEYS of every script, in the order the scripts expect.
func (k keys) all() []string {
	return []string{k.record, k.open[0], k.open[1], k.open[2], k.result}
}

// openStatuses are the statuses with an open set, in the order of keys.open.
var openStatuses = [3]idemstore.Status{idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered}

// tag is the namespace part every key of a namespace starts with.
func (s *Store) tag(namespace string) string {
	return s.prefix + ":{" + namespace + "}:"
}

// keysOf validates a (namespace, key) pair and names its keys.
func (s *Store) keysOf(op, namespace, key string) (keys, error) {
	switch {
	case namespace == "":
		return keys{}, fmt.Errorf("redisstore %s: empty namespace: %w", op, idemstore.ErrMissingKey)
	case key == "":
		return keys{}, fmt.Errorf("redisstore %s: empty key: %w", op, idemstore.ErrMissingKey)
	case strings.ContainsAny(namespace, "{}"):
		return keys{}, fmt.Errorf("%w: redisstore %s: namespace %q contains '{' or '}' (it is the cluster hash tag)", ErrInvalidKey, op, namespace)
	}
	t := s.tag(namespace)
	return keys{
		record: t + "r:" + key,
		open:   [3]string{t + "open:" + string(openStatuses[0]), t + "open:" + string(openStatuses[1]), t + "open:" + string(openStatuses[2])},
		result: t + "res:" + key,
		member: key,
	}, nil
}

// ceilMillis is t in Unix ms, rounded up (storeutil.CeilMillis).
func ceilMillis(t time.Time) int64 { return storeutil.CeilMillis(t) }

// msArg is a time as a script argument: Unix ms, or "" for the zero time.
func msArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(ceilMillis(t), 10)
}

// fromFlat turns the flat field/value list a script returns into a map.
func fromFlat(v any) (map[string]string, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("redisstore: unexpected record reply %T", v)
	}
	m := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, ok1 := list[i].(string)
		val, ok2 := list[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisstore: unexpected record field %T=%T", list[i], list[i+1])
		}
		m[k] = val
	}
	return m, nil
}

// decode builds a Record from a record's hash.
func decode(namespace, key string, h map[string]string) idemstore.Record {
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(h[f], 10, 64)
		return n
	}
	ms := func(f string) time.Time {
		if h[f] == "" {
			return time.Time{}
		}
		return time.UnixMilli(num(f)).UTC()
	}
	r := idemstore.Record{
		Namespace:             namespace,
		Key:                   key,
		SchemaVersion:         int(num(fSchema)),
		Status:                idemstore.Status(h[fStatus]),
		LeaseToken:            h[fToken],
		LeaseUntil:            ms(fLeaseUntil),
		Attempts:              int(num(fAttempts)),
		Takeovers:             int(num(fTakeovers)),
		Fence:                 idemstore.Fence{Generation: h[fGeneration], Claim: num(fClaim)},
		PayloadHash:           h[fHash],
		MessageID:             h[fMessageID],
		ResultUntil:           ms(fResultUntil),
		ExpiresAt:             ms(fExpiresAt),
		LastError:             h[fLastError],
		DeadLetterReason:      idemstore.Reason(h[fDLReason]),
		DeadLetteredMessageID: h[fDLSourceID],
		DeadLetterMessageID:   h[fDLCopyID],
		FirstAttemptAt:        ms(fFirst),
		UpdatedAt:             ms(fUpdated),
		Redrives:              int(num(fRedrives)),
		RedrivenFrom:          h[fRedrivenFrom],
		Resolution:            idemstore.Resolution(h[fResolution]),
		ResolutionNote:        h[fResolutionNote],
	}
	if v, ok := h[fResult]; ok && v != "" {
		r.Result = []byte(v)
	}
	return r
}

// expiredAt reports whether a stored hash counts as absent at now.
func expiredAt(h map[string]string, now time.Time) bool {
	ea := h[fExpiresAt]
	if ea == "" {
		return false
	}
	n, err := strconv.ParseInt(ea, 10, 64)
	return err == nil && n < ceilMillis(now)
}

// truncate cuts s to at most n bytes, marking the cut (storeutil.Truncate).
func truncate(s string, n int) string { return storeutil.Truncate(s, n) }
