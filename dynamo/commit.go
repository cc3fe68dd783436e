package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Committer = (*Store)(nil)

// Commit records the outcome of a run that held no lease (the optimistic
// mode); see [idemstore.Committer].
//
// The first request assumes what a first delivery finds, an absent key: a
// PutItem of the whole record conditioned on attribute_not_exists(pk), or,
// when the commit carries writes or a result kept apart, one
// TransactWriteItems holding that put, the writes and the result item.
// Either way one round trip, and a refusal brings the item back
// (ALL_OLD, in the cancellation reason for a transaction), so what refused
// it is known without a read. Only when that item lets the commit apply
// (FAILED with the same payload, an abandoned lease, an expired record) is
// a second request sent, conditioned on the item exactly as it was seen,
// so the record it writes is known without reading it back.
//
// A transaction carries a ClientRequestToken made from req.Token and the
// request's round, so a retry of the same commit within DynamoDB's ten
// minutes is answered as the success it was, not applied twice; past
// them, the item's token says the same.
func (s *Store) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	if err := idemstore.CheckCommit(req); err != nil {
		return idemstore.CommitResult{}, fmt.Errorf("dynamo: %w", err)
	}
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.CommitResult{}, err
	}
	for _, f := range []struct{ name, v string }{{"payload hash", req.PayloadHash}, {"message ID", req.MessageID}} {
		if err := checkField(f.name, f.v); err != nil {
			return idemstore.CommitResult{}, err
		}
	}
	if len(req.Result) > MaxResultBytes {
		return idemstore.CommitResult{}, fmt.Errorf("%w: dynamo commit %q: result of %d bytes, over the %d a result item holds",
			idemstore.ErrResultTooLarge, pk, len(req.Result), MaxResultBytes)
	}
	if req.Status == idemstore.StatusFailed && req.MaxAttempts == 1 {
		// Every failure is the last one: nothing to ask the table.
		return idemstore.CommitResult{AtLimit: true}, nil
	}
	c := &commitCall{s: s, req: req, pk: pk}
	if err := c.prepare(); err != nil {
		return idemstore.CommitResult{}, err
	}
	var seen item // nil: assume the key is absent
	for round := range maxClaimRounds {
		written, err := c.write(ctx, round, seen)
		if err == nil {
			return idemstore.CommitResult{Committed: true, Record: written.record()}, nil
		}
		old, refused, err := c.refusal(err)
		if !refused {
			return idemstore.CommitResult{}, err
		}
		var live *idemstore.Record
		if old != nil && !old.expiredAt(req.Now) {
			r := old.record()
			live = &r
		}
		apply, atLimit, own, _ := idemstore.CommitRefusal(live, req)
		switch {
		case own:
			// An earlier try of this very commit applied, its answer lost:
			// only this commit writes its token.
			return idemstore.CommitResult{Committed: true, Record: *live}, nil
		case atLimit:
			return idemstore.CommitResult{AtLimit: true, Record: recordOf(live)}, nil
		case !apply && live != nil:
			return idemstore.CommitResult{Record: *live}, nil
		}
		seen = old
	}
	return idemstore.CommitResult{}, fmt.Errorf("%w: dynamo commit %q: the record changed under each of %d conditional writes",
		idemstore.ErrStoreUnavailable, pk, maxClaimRounds)
}

func recordOf(r *idemstore.Record) idemstore.Record {
	if r == nil {
		return idemstore.Record{}
	}
	return *r
}

// commitCall is one Commit: its request, and the attributes every round
// writes.
type commitCall struct {
	s   *Store
	req idemstore.CommitRequest
	pk  string
	// set are the attributes every round sets (nil values: removed).
	set map[string]types.AttributeValue
	// apart is the result item's put when the result is kept apart.
	apart *types.Put
	// writes are the caller's transaction actions.
	writes []types.TransactWriteItem
}

// prepare works out what every round writes.
func (c *commitCall) prepare() error {
	req, s := c.req, c.s
	now := numAV(ceilMillis(req.Now))
	c.set = map[string]types.AttributeValue{
		attrSchema:     numAV(idemstore.SchemaVersion),
		attrStatus:     strAV(string(req.Status)),
		attrToken:      strAV(req.Token),
		attrLeaseUntil: now,
		attrHash:       strAV(req.PayloadHash),
		attrMessageID:  nil,
		attrExpiresAt:  nil,
		attrUpdatedAt:  now,
		attrOpenStatus: nil,
	}
	if req.MessageID != "" {
		c.set[attrMessageID] = strAV(req.MessageID)
	}
	if !req.ExpiresAt.IsZero() {
		c.set[attrExpiresAt] = numAV(ceilSecs(req.ExpiresAt))
	}
	c.set[attrResult], c.set[attrResultApart], c.set[attrResultUntil] = nil, nil, nil
	if req.Status == idemstore.StatusFailed {
		c.set[attrOpenStatus] = strAV(string(idemstore.StatusFailed))
		c.set[attrLastError] = nil
		if e := truncate(req.Error, s.errLimit); e != "" {
			c.set[attrLastError] = strAV(e)
		}
		return nil
	}
	creq := idemstore.CompleteRequest{Lease: idemstore.Lease{Token: req.Token}, Result: req.Result, ResultUntil: req.ResultUntil, ExpiresAt: req.ExpiresAt}
	switch {
	case len(req.Result) > s.inlineLimit || s.itemBound(c.pk)+len(attrResult)+len(req.Result) > maxItemBytes:
		c.apart = s.resultPut(c.pk, creq)
		c.set[attrResultApart] = numAV(int64(len(req.Result)))
	case len(req.Result) > 0:
		c.set[attrResult] = &types.AttributeValueMemberB{Value: req.Result}
	}
	if !req.ResultUntil.IsZero() {
		c.set[attrResultUntil] = numAV(ceilSecs(req.ResultUntil))
	}
	for i, w := range req.Writes {
		switch w := w.(type) {
		case types.TransactWriteItem:
			c.writes = append(c.writes, w)
		case *types.TransactWriteItem:
			if w == nil {
				return fmt.Errorf("%w: write %d is a nil *types.TransactWriteItem", ErrTransactionLimit, i)
			}
			c.writes = append(c.writes, *w)
		default:
			return fmt.Errorf("%w: write %d is a %T; the DynamoDB store commits types.TransactWriteItem values", idemstore.ErrUnsupportedWrite, i, w)
		}
	}
	if len(c.writes) > 0 || c.apart != nil {
		own := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: keyOf(c.pk)}}
		if err := s.checkTx(c.pk, append([]types.TransactWriteItem{own}, c.writes...), c.apart); err != nil {
			return fmt.Errorf("dynamo commit %q: %w", c.pk, err)
		}
	}
	return nil
}

// write sends one round: a fresh record when seen is nil or expired, else
// the update of seen as it was.
func (c *commitCall) write(ctx context.Context, round int, seen item) (item, error) {
	e := newExpr()
	var own types.TransactWriteItem
	var written item
	switch {
	case seen == nil || seen.expiredAt(c.req.Now):
		written = c.fresh()
		var cond string
		if seen == nil {
			cond = "attribute_not_exists(" + e.n(attrPK) + ")"
		} else {
			// Replace the expired item only as it was seen: if anyone
			// replaced it meanwhile, the next round looks at theirs.
			cond = e.n(attrExpiresAt) + " = " + e.v(seen[attrExpiresAt])
		}
		own.Put = &types.Put{
			TableName:                           aws.String(c.s.table),
			Item:                                written,
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
	default:
		written = c.over(seen)
		for _, name := range slices.Sorted(maps.Keys(c.set)) {
			if v := written[name]; v != nil {
				e.Set(name, v)
			} else {
				e.Remove(name)
			}
		}
		for _, name := range []string{attrAttempts, attrClaim, attrTakeovers} {
			e.Set(name, written[name])
		}
		// The item exactly as seen: the same holder (token), state and
		// claim, untouched since (updated_at), unexpired, and for an
		// abandoned lease, still ended.
		cond := e.n(attrToken) + " = " + e.v(seen[attrToken]) + " AND " +
			e.n(attrStatus) + " = " + e.v(seen[attrStatus]) + " AND " +
			e.n(attrClaim) + " = " + e.v(seen[attrClaim]) + " AND " +
			e.n(attrUpdatedAt) + " = " + e.v(seen[attrUpdatedAt]) + " AND " +
			e.unexpired(ceilSecs(c.req.Now))
		if seen.str(attrStatus) == string(idemstore.StatusInProgress) {
			cond += " AND " + e.n(attrLeaseUntil) + " < " + e.num(ceilMillis(c.req.Now.Add(-c.req.Grace)))
		}
		own.Update = &types.Update{
			TableName:                           aws.String(c.s.table),
			Key:                                 keyOf(c.pk),
			UpdateExpression:                    aws.String(e.update()),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
	}
	if len(c.writes) == 0 && c.apart == nil {
		return written, c.single(ctx, own)
	}
	actions := make([]types.TransactWriteItem, 0, len(c.writes)+2)
	actions = append(actions, own)
	actions = append(actions, c.writes...)
	if c.apart != nil {
		actions = append(actions, types.TransactWriteItem{Put: c.apart})
	}
	_, err := c.s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      actions,
		ClientRequestToken: aws.String(c.req.Token + "-" + strconv.Itoa(round)),
	})
	return written, err
}

// single sends a round without a transaction.
func (c *commitCall) single(ctx context.Context, own types.TransactWriteItem) error {
	if p := own.Put; p != nil {
		_, err := c.s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           p.TableName,
			Item:                                p.Item,
			ConditionExpression:                 p.ConditionExpression,
			ExpressionAttributeNames:            p.ExpressionAttributeNames,
			ExpressionAttributeValues:           p.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: p.ReturnValuesOnConditionCheckFailure,
		})
		return err
	}
	u := own.Update
	_, err := c.s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           u.TableName,
		Key:                                 u.Key,
		UpdateExpression:                    u.UpdateExpression,
		ConditionExpression:                 u.ConditionExpression,
		ExpressionAttributeNames:            u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// fresh is the item of a fresh generation. Its generation is the token:
// a retried request must be the same request.
func (c *commitCall) fresh() item {
	now := numAV(ceilMillis(c.req.Now))
	it := item{
		attrPK:           strAV(c.pk),
		attrAttempts:     numAV(1),
		attrClaim:        numAV(1),
		attrTakeovers:    numAV(0),
		attrGeneration:   strAV(c.req.Token),
		attrFirstAttempt: now,
	}
	for name, v := range c.set {
		if v != nil {
			it[name] = v
		}
	}
	return it
}

// over is seen as the commit leaves it.
func (c *commitCall) over(seen item) item {
	it := maps.Clone(seen)
	for name, v := range c.set {
		if v != nil {
			it[name] = v
		} else {
			delete(it, name)
		}
	}
	attempts, _ := seen.num(attrAttempts)
	claim, _ := seen.num(attrClaim)
	takeovers, _ := seen.num(attrTakeovers)
	if seen.str(attrStatus) == string(idemstore.StatusInProgress) {
		takeovers++
	}
	it[attrAttempts] = numAV(attempts + 1)
	it[attrClaim] = numAV(claim + 1)
	it[attrTakeovers] = numAV(takeovers)
	return it
}

// refusal reads a round's error: the item that refused the record's own
// write (nil for none) and refused true; or refused false and the error
// to return.
func (c *commitCall) refusal(err error) (old item, refused bool, _ error) {
	if old, ok := conditionFailed(err); ok {
		return old, true, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		if refusedForShape(err) && len(c.writes) > 0 {
			return nil, false, fmt.Errorf("%w: dynamo commit %q: %w", ErrTransactionLimit, c.pk, err)
		}
		return nil, false, classify("commit", c.pk, err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
		// The record refused the commit: whatever else was refused with
		// it, the record decides (a duplicate is a duplicate, not a write
		// refused).
		return item(reasons[0].Item), true, nil
	}
	// The record's own write would have applied: the caller's writes or
	// a transient conflict cancelled it. The completion's analysis names
	// them; the record's own reason is already known to be no refusal.
	creq := idemstore.CompleteRequest{Lease: idemstore.Lease{Token: c.req.Token}, Now: c.req.Now, Writes: c.req.Writes}
	return nil, false, cancellation(c.pk, creq, tce, c.apart != nil)
}
