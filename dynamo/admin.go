package dynamo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Named errors of the operator operations.
var (
	// ErrLeaseValid: the record is IN_PROGRESS and its lease has not run
	// out; someone may still be working on it. Release and Forget refuse it
	// unless forced.
	ErrLeaseValid = errors.New("dynamo: lease is still valid")
	// ErrRecordChanged: the record is no longer the one the operator looked
	// at (another claim took it, or its holder recorded an outcome), so a
	// release based on the old view was not applied.
	ErrRecordChanged = errors.New("dynamo: record changed since it was read")
	// ErrNotInProgress: only an IN_PROGRESS record has a lease to release.
	ErrNotInProgress = errors.New("dynamo: record is not IN_PROGRESS")
)

// AdminAPI is what the operator operations need: the store's calls plus
// Scan, which only counting COMPLETED records uses (they are not in the
// open index).
type AdminAPI interface {
	API
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ AdminAPI = (*dynamodb.Client)(nil)

// Admin is a Store with the operations an operator needs on top of the
// lambdaidem.Store contract: release a stuck lease, forget a key, count
// records. Functions never need it; the operator CLI does.
type Admin struct {
	*Store
	scan AdminAPI
}

// NewAdmin returns an Admin over table. Options are the Store's.
func NewAdmin(client AdminAPI, table string, opts ...Option) *Admin {
	return &Admin{Store: New(client, table, opts...), scan: client}
}

// ReleaseRequest asks to clear the lease of an IN_PROGRESS record.
type ReleaseRequest struct {
	Namespace string
	Key       string
	// Token is the lease token the operator saw (Record.LeaseToken from a
	// Get). The release applies only while the record still carries it, so
	// a claim that happened in between is never clobbered. Required.
	Token string
	// Now is the clock the lease is judged by.
	Now time.Time
	// Force releases a lease that is still valid. Its holder, if it is
	// still running, then loses its lease: its outcome is refused
	// (ErrLeaseLost) and the message will run again.
	Force bool
	// Note is stored as last_error, so the record says why it failed.
	// Default "lease released by operator".
	Note string
}

// Release moves an IN_PROGRESS record whose lease has run out (or any
// IN_PROGRESS record, with Force) to FAILED, in one conditional write:
// status IN_PROGRESS, the token the operator read, not expired, and unless
// forced lease_until < Now. Attempts and the fence stay; the lease token is
// replaced, so the old holder's late writes are refused as a lost lease. The
// next delivery of the message claims the key as after any failure.
//
// It returns the record as written. A refusal returns the current record
// with ErrLeaseValid, ErrRecordChanged, ErrNotInProgress or
// lambdaidem.ErrNotFound.
func (a *Admin) Release(ctx context.Context, req ReleaseRequest) (lambdaidem.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	if req.Token == "" {
		return lambdaidem.Record{}, fmt.Errorf("%w: release %q: no lease token (read the record first)", ErrInvalidKey, pk)
	}
	note := req.Note
	if note == "" {
		note = "lease released by operator"
	}
	newToken := "released-" + rand.Text()
	failed := strAV(string(lambdaidem.StatusFailed))
	e := newExpr()
	e.Set(attrStatus, failed)
	e.Set(attrOpenStatus, failed)
	e.Set(attrToken, strAV(newToken))
	e.Set(attrLastError, strAV(truncate(note, a.errLimit)))
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	cond := e.n(attrToken) + " = " + e.s(req.Token) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(lambdaidem.StatusInProgress)) + " AND " +
		e.unexpired(ceilSecs(req.Now))
	if !req.Force {
		// The same rounding as a takeover, without its grace: the operator
		// decides, and the holder's writes are fenced by the token anyway.
		cond += " AND " + e.n(attrLeaseUntil) + " < " + e.num(ceilMillis(req.Now))
	}
	rec, old, err := a.updateOrOld(ctx, "release", pk, e, cond)
	if err != nil || old == nil {
		return rec, err
	}
	switch {
	case len(old) == 0 || old.expiredAt(req.Now):
		return lambdaidem.Record{}, fmt.Errorf("%w: %q", lambdaidem.ErrNotFound, pk)
	case old.str(attrToken) == newToken:
		// A retried request whose first try applied (docs/design.md, rule 1).
		return old.record(), nil
	case old.str(attrToken) != req.Token:
		r := old.record()
		return r, fmt.Errorf("%w: release %q: it is now %s with another lease token (claim %d)", ErrRecordChanged, pk, r.Status, r.Fence.Claim)
	case lambdaidem.Status(old.str(attrStatus)) != lambdaidem.StatusInProgress:
		return old.record(), fmt.Errorf("%w: release %q: it is %s", ErrNotInProgress, pk, old.str(attrStatus))
	default:
		r := old.record()
		return r, fmt.Errorf("%w: release %q: lease runs until %s", ErrLeaseValid, pk, r.LeaseUntil.Format(time.RFC3339Nano))
	}
}

// ForgetRequest asks to delete a record.
type ForgetRequest struct {
	Namespace string
	Key       string
	// Now is the clock the lease and the expiry are judged by.
	Now time.Time
	// Force deletes an IN_PROGRESS record whose lease is still valid. Its
	// holder's outcome is then refused, and a redelivery runs the message
	// again while the holder may still be running.
	Force bool
}

// Forget deletes a record so that its key is processed again by the next
// message that carries it, in one DeleteItem conditioned (unless forced) on
// the record not being IN_PROGRESS with a valid lease. It
// returns the deleted record. An absent or expired record yields
// lambdaidem.ErrNotFound (an expired one is deleted all the same); a valid
// lease yields ErrLeaseValid with the record, which stays.
//
// Unlike Store.Delete, Forget never takes a key from under a running
// handler by accident. Redrive uses neither: its reset
// (Store.ResetDeadLetter) applies only to a record dead-lettered by the
// copy being redriven.
func (a *Admin) Forget(ctx context.Context, req ForgetRequest) (lambdaidem.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	in := &dynamodb.DeleteItemInput{
		TableName:                           aws.String(a.table),
		Key:                                 keyOf(pk),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if !req.Force {
		// An absent item passes (nothing is deleted, and no ALL_OLD comes
		// back): a refusal is kept for a valid lease, the one case that
		// needs the item returned.
		e := newExpr()
		exp := e.n(attrExpiresAt)
		in.ConditionExpression = aws.String("attribute_not_exists(" + e.n(attrPK) + ") OR " +
			e.n(attrStatus) + " <> " + e.s(string(lambdaidem.StatusInProgress)) +
			" OR " + e.n(attrLeaseUntil) + " < " + e.num(ceilMillis(req.Now)) +
			" OR (attribute_exists(" + exp + ") AND " + exp + " < " + e.num(ceilSecs(req.Now)) + ")")
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.names, e.values
	}
	out, err := a.client.DeleteItem(ctx, in)
	if err == nil {
		old := item(out.Attributes)
		if len(old) == 0 || old.expiredAt(req.Now) {
			return lambdaidem.Record{}, fmt.Errorf("%w: %q", lambdaidem.ErrNotFound, pk)
		}
		return old.record(), nil
	}
	old, ok := conditionFailed(err)
	if !ok {
		return lambdaidem.Record{}, classify("forget", pk, err)
	}
	if len(old) == 0 {
		return lambdaidem.Record{}, fmt.Errorf("%w: %q", lambdaidem.ErrNotFound, pk)
	}
	r := old.record()
	return r, fmt.Errorf("%w: forget %q: lease runs until %s", ErrLeaseValid, pk, r.LeaseUntil.Format(time.RFC3339Nano))
}

// CountRequest selects the records Count counts.
type CountRequest struct {
	// Status is any of the four. IN_PROGRESS, FAILED and DEAD_LETTERED are
	// counted from the open index; COMPLETED records are not in it, so
	// counting them scans the whole table (read capacity proportional to
	// the table's size: say so before doing it).
	Status lambdaidem.Status
	// Namespace, when set, counts only that namespace.
	Namespace string
	// LeaseEndedBefore, when set, counts only records whose lease ended
	// before it (with Status IN_PROGRESS and Now: stuck records).
	LeaseEndedBefore time.Time
	// Now leaves out records expired at Now. Zero means time.Now().
	Now time.Time
	// Progress, when set, is called after every page read.
	Progress func(CountProgress)
}

// CountProgress reports how far a count has got.
type CountProgress struct {
	// Pages is the number of Query or Scan pages read so far.
	Pages int
	// Scanned is the number of items read, Counted the number that matched.
	Scanned int
	Counted int
}

// Count counts records of one status, page by page, asking DynamoDB for
// counts only (Select COUNT): no item is transferred. Expired records are
// not counted. On error it returns the count so far with the error.
func (a *Admin) Count(ctx context.Context, req CountRequest) (int, error) {
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
	case lambdaidem.StatusInProgress, lambdaidem.StatusFailed, lambdaidem.StatusDeadLettered:
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
	case lambdaidem.StatusCompleted:
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
		return 0, fmt.Errorf("dynamo: count: unknown status %q", req.Status)
	}
	var p CountProgress
	var start map[string]types.AttributeValue
	for {
		n, scanned, next, err := page(start)
		if err != nil {
			return p.Counted, classify("count", string(req.Status), err)
		}
		p.Pages++
		p.Scanned += int(scanned)
		p.Counted += int(n)
		if req.Progress != nil {
			req.Progress(p)
		}
		if len(next) == 0 {
			return p.Counted, nil
		}
		start = next
	}
}
