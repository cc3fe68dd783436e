package dynamo

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemAttrs are the stored attributes FuzzItemRecord fills, in the order of
// the fuzzer's values.
var itemAttrs = []string{
	attrPK, attrSchema, attrStatus, attrToken, attrLeaseUntil, attrAttempts, attrTakeovers,
	attrGeneration, attrClaim, attrHash, attrMessageID, attrResult, attrResultUntil, attrExpiresAt,
	attrLastError, attrDLReason, attrDLSourceID, attrDLCopyID, attrFirstAttempt, attrUpdatedAt, attrOpenStatus,
}

// fuzzItem builds an item from the fuzzer's values: vals holds one value
// per attribute, separated by NUL, and each two bits of kinds give that
// attribute's type (string, number, binary, or absent).
func fuzzItem(vals string, kinds uint64) item {
	it := item{}
	parts := strings.Split(vals, "\x00")
	for i, name := range itemAttrs {
		if i >= len(parts) {
			break
		}
		v := parts[i]
		switch kinds >> (2 * i) & 3 {
		case 0:
			it[name] = &types.AttributeValueMemberS{Value: v}
		case 1:
			it[name] = &types.AttributeValueMemberN{Value: v}
		case 2:
			it[name] = &types.AttributeValueMemberB{Value: []byte(v)}
		}
	}
	return it
}

// FuzzItemRecord decodes arbitrary items, as written by hand or by another
// version of the library: decoding never panics, the key splits back to
// what was stored, and the expiry and lease checks agree with the record.
func FuzzItemRecord(f *testing.F) {
	f.Add("ns#k\x001\x00COMPLETED\x00tok\x001700000000000\x002\x000\x00g\x003\x00hash\x00m\x00{}\x001700000000\x001700000000\x00\x00\x00\x00\x001700000000000\x001700000000000\x00", uint64(0b01_01_00_00_00_00_01_01_10_00_00_01_00_01_01_01_00_01_00_01_00))
	f.Add("ns#a#b\x00x\x00IN_PROGRESS\x00\x009223372036854775807\x00-1\x001e3\x00\x00-9223372036854775808", uint64(0x5555555555))
	f.Add("no-separator\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xfe", uint64(0))
	f.Add("#\x0099999999999999999999\x00\x00\x00-99999999999999", uint64(0xffffffff))
	f.Fuzz(func(t *testing.T, vals string, kinds uint64) {
		it := fuzzItem(vals, kinds)
		r := it.record()
		if pk, ok := it[attrPK].(*types.AttributeValueMemberS); ok && strings.Contains(pk.Value, "#") {
			if r.Namespace+"#"+r.Key != pk.Value {
				t.Fatalf("pk %q decoded as %q + %q", pk.Value, r.Namespace, r.Key)
			}
		}
		now := time.Unix(1_700_000_000, 0)
		if got, want := it.expiredAt(now), !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now); got != want {
			// The record's zero time means "never": a stored 0 is the epoch.
			if e, _ := it.num(attrExpiresAt); e != 0 {
				t.Fatalf("expiredAt = %v, record says %v (expires %v)", got, want, r.ExpiresAt)
			}
		}
		_ = it.leaseExpiredAt(now, 2*time.Second)
		_ = r.Lease()
		_ = mapSize(it)
	})
}
