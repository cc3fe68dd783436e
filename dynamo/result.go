package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// DefaultInlineResultBytes is the largest result kept on the record's own
// item. Larger results go to an item of their own, so the record stays
// small: a refused claim returns the record (ALL_OLD) and is billed by its
// size, on every duplicate.
const DefaultInlineResultBytes = 1024

// MaxResultBytes is the largest result the store holds: what fits in a
// result item of its own under DynamoDB's 400 KB item limit. A larger one
// is refused with idemstore.ErrResultTooLarge.
const MaxResultBytes = maxItemBytes - resultItemOverheadBytes

// resultItemOverheadBytes bounds a result item apart from its result: the
// hashed key, the record's key, the token, the expiry and the names.
const resultItemOverheadBytes = 4096

// resultPKPrefix starts the key of every result item. A record's key
// starts with its namespace, which is never empty and never contains "#",
// so no record can have a key starting with "#".
const resultPKPrefix = "#result#"

// WithInlineResultBytes sets the largest result kept on the record's item
// (default DefaultInlineResultBytes; negative values become 0, so that
// every non-empty result is stored apart). Larger results are stored in an
// item of their own, written in the same transaction as the completion.
func WithInlineResultBytes(n int) Option {
	return func(s *Store) { s.inlineLimit = max(n, 0) }
}

// resultPK is the key of the item that holds a record's result apart: a
// digest of the record's key, so it has a fixed length whatever the key's.
func resultPK(pk string) string {
	sum := sha256.Sum256([]byte(pk))
	return resultPKPrefix + hex.EncodeToString(sum[:])
}

// resultPut writes a result apart from its record. The item carries the
// token of the completion that wrote it: a record reads back only the
// result its own completion wrote, never one left by an earlier
// generation. It expires with the result (or the record).
func (s *Store) resultPut(pk string, req idemstore.CompleteRequest) *types.Put {
	it := map[string]types.AttributeValue{
		attrPK:     strAV(resultPK(pk)),
		attrRecord: strAV(pk),
		attrToken:  strAV(req.Lease.Token),
		attrResult: &types.AttributeValueMemberB{Value: req.Result},
		attrSchema: numAV(idemstore.SchemaVersion),
	}
	until := req.ResultUntil
	if until.IsZero() {
		until = req.ExpiresAt
	}
	if !until.IsZero() {
		it[attrExpiresAt] = numAV(ceilSecs(until))
	}
	return &types.Put{TableName: aws.String(s.table), Item: it}
}

// withResult is the record of an item, with its result read from the
// result item when it is stored apart and wanted: the record is
// COMPLETED, its result has not expired at now, and want says the caller
// needs it.
func (s *Store) withResult(ctx context.Context, it item, now time.Time, want bool) (idemstore.Record, error) {
	rec := it.record()
	size, apart := it.num(attrResultApart)
	if !apart || !want || rec.Status != idemstore.StatusCompleted || rec.ResultExpired(now) {
		return rec, nil
	}
	pk := it.str(attrPK)
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyOf(resultPK(pk)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return idemstore.Record{}, classify("read result", pk, err)
	}
	res := item(out.Item)
	v, ok := res[attrResult].(*types.AttributeValueMemberB)
	if !ok || res.str(attrToken) != rec.LeaseToken || int64(len(v.Value)) != size {
		// Only an operator's hand can get here (the two items are written
		// in one transaction and expire together).
		return idemstore.Record{}, fmt.Errorf("%w: dynamo read result %q: the result item of this completion is missing",
			idemstore.ErrStoreUnavailable, pk)
	}
	rec.Result = v.Value
	return rec, nil
}
