package dynamo

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// ListOpen yields the unfinished records of one status, least recently
// updated first, reading the sparse index OpenIndex page by page: no table
// scan. An empty Namespace lists every namespace (the index is read across
// namespaces; a namespace is a filter). The index is eventually
// consistent, so a record written a moment ago may be missing or show its
// previous state; read it with Get before acting on it. The sequence stops
// at the first error, which it yields. See [idemstore.Admin].
func (s *Store) ListOpen(ctx context.Context, req idemstore.ListOpenRequest) iter.Seq2[idemstore.Record, error] {
	return func(yield func(idemstore.Record, error) bool) {
		switch req.Status {
		case idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered:
		default:
			yield(idemstore.Record{}, fmt.Errorf("dynamo: list %q: %w: only IN_PROGRESS, FAILED and DEAD_LETTERED records are in the open index", req.Status, idemstore.ErrNotIndexed))
			return
		}
		if strings.Contains(req.Namespace, "#") {
			yield(idemstore.Record{}, fmt.Errorf("%w: namespace %q contains '#'", ErrInvalidKey, req.Namespace))
			return
		}
		now := req.Now
		if now.IsZero() {
			now = time.Now()
		}
		size := int32(100)
		if req.PageSize > 0 {
			size = int32(min(req.PageSize, 1<<20))
		}
		e := newExpr()
		keyCond := e.n(attrOpenStatus) + " = " + e.s(string(req.Status))
		if !req.UpdatedBefore.IsZero() {
			keyCond += " AND " + e.n(attrUpdatedAt) + " < " + e.num(req.UpdatedBefore.UnixMilli())
		}
		var filter *string
		if req.Namespace != "" {
			filter = aws.String("begins_with(" + e.n(attrPK) + ", " + e.s(req.Namespace+"#") + ")")
		}
		var p idemstore.PageProgress
		var start map[string]types.AttributeValue
		for {
			out, err := s.client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(s.table),
				IndexName:                 aws.String(OpenIndex),
				KeyConditionExpression:    aws.String(keyCond),
				FilterExpression:          filter,
				ExpressionAttributeNames:  e.names,
				ExpressionAttributeValues: e.values,
				ExclusiveStartKey:         start,
				Limit:                     aws.Int32(size),
			})
			if err != nil {
				yield(idemstore.Record{}, classify("list", string(req.Status), err))
				return
			}
			var live []idemstore.Record
			for _, raw := range out.Items {
				if it := item(raw); !it.expiredAt(now) {
					live = append(live, it.record())
				}
			}
			p.Pages++
			p.Read += int(out.ScannedCount)
			p.Matched += len(live)
			if req.Progress != nil {
				req.Progress(p)
			}
			for _, r := range live {
				if !yield(r, nil) {
					return
				}
			}
			if len(out.LastEvaluatedKey) == 0 {
				return
			}
			start = out.LastEvaluatedKey
		}
	}
}
