package dynamo

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// AdminAPI is what the operator calls need: the store's calls plus Scan,
// which only counting COMPLETED records uses (they are not in the open
// index).
type AdminAPI interface {
	API
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ AdminAPI = (*dynamodb.Client)(nil)

// Admin is a Store with the operator calls of [idemstore.Admin]: release
// a stuck lease, forget a key, count and list records. Functions never
// need it; the operator CLI does.
type Admin struct {
	*Store
	scan AdminAPI
}

var _ idemstore.Admin = (*Admin)(nil)

// NewAdmin returns an Admin over table. Options are the Store's.
func NewAdmin(client AdminAPI, table string, opts ...Option) *Admin {
	return &Admin{Store: New(client, table, opts...), scan: client}
}

// Release ends the lease of an IN_PROGRESS record; see
// [idemstore.Admin]. It is one UpdateItem conditioned on the status, the
// token the operator read, the expiry and lease_until < Now-Grace (the
// rounding of a takeover). A forced release of a live lease is a second
// UpdateItem, conditioned on the lease still being live, that replaces the
// token and the last error and nothing else.
func (a *Admin) Release(ctx context.Context, req idemstore.ReleaseRequest) (idemstore.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if req.Token == "" {
		return idemstore.Record{}, fmt.Errorf("%w: release %q: no lease token (read the record first)", ErrInvalidKey, pk)
	}
	token := "released-" + rand.Text()
	rec, refused, err := a.release(ctx, pk, req, token, false)
	if err == nil && refused != nil && req.Force && idemstore.LeaseLive(*refused, req.Now, req.Grace) && refused.LeaseToken == req.Token {
		rec, refused, err = a.release(ctx, pk, req, token, true)
	}
	if err != nil || refused == nil {
		return rec, err
	}
	return *refused, refusal("release", pk, idemstore.ReleaseRefusal(*refused, req))
}

// refusal is an admin write's refusal as the operation's error: why, the
// reason the record that refused it gives, or ErrRecordChanged when that
// record gives none.
func refusal(op, pk string, why error) error {
	if why == nil {
		why = fmt.Errorf("%w: the write's condition failed", idemstore.ErrRecordChanged)
	}
	return fmt.Errorf("dynamo: %s %q: %w", op, pk, why)
}

// release writes a release (revoke false: to FAILED, if the lease is no
// longer live) or a revocation (revoke true: a new token, if it is live).
// It returns the record as written, or the record that refused the write.
func (a *Admin) release(ctx context.Context, pk string, req idemstore.ReleaseRequest, token string, revoke bool) (rec idemstore.Record, refused *idemstore.Record, err error) {
	e := newExpr()
	if !revoke {
		failed := strAV(string(idemstore.StatusFailed))
		e.Set(attrStatus, failed)
		e.Set(attrOpenStatus, failed)
		e.Remove(attrDLReason) // a FAILED record has no dead-lettering pending
		e.Remove(attrDLSourceID)
	}
	e.Set(attrToken, strAV(token))
	e.Set(attrLastError, strAV(truncate(cmp.Or(req.Note, idemstore.DefaultReleaseNote), a.errLimit)))
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	cmpLease := " < "
	if revoke {
		cmpLease = " >= "
	}
	cond := e.n(attrToken) + " = " + e.s(req.Token) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusInProgress)) + " AND " +
		e.n(attrLeaseUntil) + cmpLease + e.num(ceilMillis(req.Now.Add(-req.Grace))) + " AND " +
		e.unexpired(ceilSecs(req.Now))
	return a.tokenUpdate(ctx, "release", pk, e, cond, token, req.Now)
}

// Forget removes a record, or revokes its live lease and lets it expire
// when that lease has run out; see [idemstore.Admin]. It is one
// DeleteItem conditioned on the record being neither DEAD_LETTERED (unless
// AbandonCopy) nor under a live lease; a forced forget of a live lease is
// then an UpdateItem, conditioned on the lease the DeleteItem saw, that
// replaces the token and sets expires_at, and lease_until with it, to the
// lease's end plus the grace (rounded up to the second).
func (a *Admin) Forget(ctx context.Context, req idemstore.ForgetRequest) (idemstore.ForgetResult, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.ForgetResult{}, err
	}
	// A holder extending its lease between the delete and the revocation
	// moves lease_until; each round looks again. Extensions are seconds
	// apart, so a few rounds are plenty.
	for range 5 {
		deleted, refused, err := a.forgetDelete(ctx, pk, req)
		switch {
		case err != nil:
			return idemstore.ForgetResult{}, err
		case deleted != nil:
			return idemstore.ForgetResult{Record: *deleted, ForgottenAt: req.Now}, nil
		}
		if why := idemstore.ForgetRefusal(*refused, req); why != nil {
			return idemstore.ForgetResult{Record: *refused}, fmt.Errorf("dynamo: forget %q: %w", pk, why)
		}
		res, done, err := a.revokeForget(ctx, pk, req, *refused)
		if done || err != nil {
			return res, err
		}
	}
	return idemstore.ForgetResult{}, fmt.Errorf("dynamo: forget %q: %w: its lease kept moving", pk, idemstore.ErrRecordChanged)
}

// forgetDelete deletes the record unless it is DEAD_LETTERED (without
// AbandonCopy) or under a live lease. It returns the deleted record, or
// the unexpired record that refused the delete; an absent or expired
// record is ErrNotFound.
func (a *Admin) forgetDelete(ctx context.Context, pk string, req idemstore.ForgetRequest) (deleted, refused *idemstore.Record, err error) {
	e := newExpr()
	exp := e.n(attrExpiresAt)
	status := e.n(attrStatus)
	// An absent item passes (nothing is deleted, and no ALL_OLD comes
	// back); so does an expired one.
	ended := "(" + status + " <> " + e.s(string(idemstore.StatusInProgress)) + " OR " + e.n(attrLeaseUntil) + " < " + e.num(ceilMillis(req.Now.Add(-req.Grace))) + ")"
	if !req.AbandonCopy {
		ended = "(" + ended + " AND " + status + " <> " + e.s(string(idemstore.StatusDeadLettered)) + ")"
	}
	cond := "attribute_not_exists(" + e.n(attrPK) + ") OR (attribute_exists(" + exp + ") AND " + exp + " < " + e.num(ceilSecs(req.Now)) + ") OR " + ended
	out, err := a.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           aws.String(a.table),
		Key:                                 keyOf(pk),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var old item
	if err == nil {
		old = item(out.Attributes)
	} else if old, err = conditionFailedOrClassify("forget", pk, err); err != nil {
		return nil, nil, err
	}
	if len(old) == 0 || old.expiredAt(req.Now) {
		return nil, nil, fmt.Errorf("%w: %q", idemstore.ErrNotFound, pk)
	}
	r := old.record()
	if out != nil {
		return &r, nil, nil
	}
	return nil, &r, nil
}

// conditionFailedOrClassify returns the item a refused condition read (an
// empty one for an absent item), or the classified error of any other
// failure.
func conditionFailedOrClassify(op, pk string, err error) (item, error) {
	old, ok := conditionFailed(err)
	if !ok {
		return nil, classify(op, pk, err)
	}
	if old == nil {
		old = item{}
	}
	return old, nil
}

// revokeForget revokes the live lease of r and sets the record to expire
// when that lease has run out. done is false when the record moved since r
// was read: the caller looks again.
func (a *Admin) revokeForget(ctx context.Context, pk string, req idemstore.ForgetRequest, r idemstore.Record) (res idemstore.ForgetResult, done bool, err error) {
	token := "forgotten-" + rand.Text()
	until := ceilSecs(r.LeaseUntil.Add(req.Grace))
	e := newExpr()
	e.Set(attrToken, strAV(token))
	e.Set(attrLastError, strAV(truncate(cmp.Or(req.Note, idemstore.DefaultForgetNote), a.errLimit)))
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	e.Set(attrExpiresAt, numAV(until))
	e.Set(attrLeaseUntil, numAV(until*1000))
	cond := e.n(attrToken) + " = " + e.s(r.LeaseToken) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusInProgress)) + " AND " +
		e.n(attrLeaseUntil) + " = " + e.num(ceilMillis(r.LeaseUntil)) + " AND " +
		e.unexpired(ceilSecs(req.Now))
	rec, old, err := a.updateOrOld(ctx, "forget", pk, e, cond)
	switch {
	case err != nil:
		return idemstore.ForgetResult{}, true, err
	case old != nil && old.str(attrToken) == token:
		// A retried request whose first try applied.
		rec = old.record()
	case old != nil:
		return idemstore.ForgetResult{}, false, nil
	}
	return idemstore.ForgetResult{Record: rec, Revoked: true, ForgottenAt: time.Unix(until, 0).UTC()}, true, nil
}

// Count counts records of one status, page by page, asking DynamoDB for
// counts only (Select COUNT): no item is transferred. IN_PROGRESS, FAILED
// and DEAD_LETTERED are counted from the open index; COMPLETED records are
// not in it, and are counted only with AllowScan, by a scan of the whole
// table. An empty Namespace counts every namespace. See
// [idemstore.Admin].
func (a *Admin) Count(ctx context.Context, req idemstore.CountRequest) (int, error) {
	if strings.Contains(req.Namespace, "#") {
		return 0, fmt.Errorf("%w: namespace %q contains '#'", ErrInvalidKey, req.Namespace)
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	e := newExpr()
	filters := []string{e.unexpired(ceilSecs(now))}
	if req.Namespace != "" {
		filters = append(filters, "begins_with("+e.n(attrPK)+", "+e.s(req.Namespace+"#")+")")
	}
	if !req.LeaseEndedBefore.IsZero() {
		filters = append(filters, e.n(attrLeaseUntil)+" < "+e.num(ceilMillis(req.LeaseEndedBefore)))
	}
	var page func(start map[string]types.AttributeValue) (count, scanned int32, next map[string]types.AttributeValue, err error)
	switch req.Status {
	case idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered:
		keyCond := e.n(attrOpenStatus) + " = " + e.s(string(req.Status))
		filter := strings.Join(filters, " AND ")
		page = func(start map[string]types.AttributeValue) (int32, int32, map[string]types.AttributeValue, error) {
			out, err := a.client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(a.table),
				IndexName:                 aws.String(OpenIndex),
				KeyConditionExpression:    aws.String(keyCond),
				FilterExpression:          aws.String(filter),
				ExpressionAttributeNames:  e.names,
				ExpressionAttributeValues: e.values,
				ExclusiveStartKey:         start,
				Select:                    types.SelectCount,
			})
			if err != nil {
				return 0, 0, nil, err
			}
			return out.Count, out.ScannedCount, out.LastEvaluatedKey, nil
		}
	case idemstore.StatusCompleted:
		if !req.AllowScan {
			return 0, fmt.Errorf("dynamo: count %s: %w (it takes a scan of the whole table: AllowScan)", req.Status, idemstore.ErrNotIndexed)
		}
		filters = append(filters, e.n(attrStatus)+" = "+e.s(string(req.Status)))
		filter := strings.Join(filters, " AND ")
		page = func(start map[string]types.AttributeValue) (int32, int32, map[string]types.AttributeValue, error) {
			out, err := a.scan.Scan(ctx, &dynamodb.ScanInput{
				TableName:                 aws.String(a.table),
				FilterExpression:          aws.String(filter),
				ExpressionAttributeNames:  e.names,
				ExpressionAttributeValues: e.values,
				ExclusiveStartKey:         start,
				Select:                    types.SelectCount,
			})
			if err != nil {
				return 0, 0, nil, err
			}
			return out.Count, out.ScannedCount, out.LastEvaluatedKey, nil
		}
	default:
		return 0, fmt.Errorf("dynamo: count %q: %w", req.Status, idemstore.ErrNotIndexed)
	}
	var p idemstore.PageProgress
	var start map[string]types.AttributeValue
	for {
		n, scanned, next, err := page(start)
		if err != nil {
			return p.Matched, classify("count", string(req.Status), err)
		}
		p.Pages++
		p.Read += int(scanned)
		p.Matched += int(n)
		if req.Progress != nil {
			req.Progress(p)
		}
		if len(next) == 0 {
			return p.Matched, nil
		}
		start = next
	}
}
