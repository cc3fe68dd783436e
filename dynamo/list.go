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

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// ListOpenRequest selects unfinished records from the sparse index.
type ListOpenRequest struct {
	// Status is IN_PROGRESS, FAILED or DEAD_LETTERED. COMPLETED records
	// are not in the index.
	Status lambdaidem.Status
	// Namespace, when set, keeps only that namespace's records (a filter:
	// the index is read across namespaces).
	Namespace string
	// UpdatedBefore, when set, keeps only records last written before it
	// (e.g. "stuck for an hour").
	UpdatedBefore time.Time
	// Now hides records expired at Now, as every read does. Zero means
	// time.Now().
	Now time.Time
	// PageSize is how many index entries one Query reads. Default 100.
	PageSize int32
}

// ListOpen returns the unfinished records of one status, least recently
// updated first, reading the sparse index OpenIndex page by page: no table
// scan. The index is eventually consistent, so a record written a moment
// ago may be missing or show its previous state; read it with Get before
// acting on it. The sequence stops at the first error, which it yields.
func (s *Store) ListOpen(ctx context.Context, req ListOpenRequest) iter.Seq2[lambdaidem.Record, error] {
	return func(yield func(lambdaidem.Record, error) bool) {
		switch req.Status {
		case lambdaidem.StatusInProgress, lambdaidem.StatusFailed, lambdaidem.StatusDeadLettered:
		default:
			yield(lambdaidem.Record{}, fmt.Errorf("dynamo: list: status %q is not in the open index", req.Status))
			return
		}
		if strings.Contains(req.Namespace, "#") {
			yield(lambdaidem.Record{}, fmt.Errorf("%w: namespace %q contains '#'", ErrInvalidKey, req.Namespace))
			return
		}
		now := req.Now
		if now.IsZero() {
			now = time.Now()
		}
		if req.PageSize <= 0 {
			req.PageSize = 100
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
				Limit:                     aws.Int32(req.PageSize),
			})
			if err != nil {
				yield(lambdaidem.Record{}, classify("list", string(req.Status), err))
				return
			}
			for _, raw := range out.Items {
				it := item(raw)
				if it.expiredAt(now) {
					continue
				}
				if !yield(it.record(), nil) {
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
