package dynamo

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// API is the part of *dynamodb.Client the store uses. Tests and tools may
// wrap a client with it (to count or fail requests); the store never needs
// more than these calls.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// DefaultLastErrorBytes bounds the stored last_error text: long enough for
// an error chain and a panic's stack, short enough to keep the item small
// (a refused conditional write is billed by the size of the item it read).
const DefaultLastErrorBytes = 4096

// Option configures a Store.
type Option func(*Store)

// WithLastErrorBytes sets how many bytes of an error's text are stored
// (default DefaultLastErrorBytes; values below 64 become 64). Longer texts
// are cut on a character boundary and marked.
func WithLastErrorBytes(n int) Option {
	return func(s *Store) { s.errLimit = max(n, 64) }
}

// Store is the DynamoDB implementation of [idemstore.Store]. It is safe for
// concurrent use and holds no state besides its configuration.
type Store struct {
	client      API
	table       string
	errLimit    int
	inlineLimit int
}

var _ idemstore.Store = (*Store)(nil)

// New returns a Store keeping records in table (a name or a table ARN)
// through client. The table must have a string partition key "pk"
// (CreateTable makes one). A nil client, or a table name DynamoDB would
// refuse (CheckTableName: an unset environment variable reads as ""), is
// refused at once: New panics with a *idemstore.ConfigError wrapping
// ErrInvalidTableName (or idemstore.ErrInvalidOption for the client), as
// the decorators do for options that could never work, rather than fail
// every message with a validation error.
func New(client API, table string, opts ...Option) *Store {
	if client == nil || reflect.ValueOf(client).Kind() == reflect.Pointer && reflect.ValueOf(client).IsNil() {
		panic(&idemstore.ConfigError{Handler: "dynamo.New", Option: "client", Err: fmt.Errorf("%w: the DynamoDB client is nil", idemstore.ErrInvalidOption)})
	}
	if err := CheckTableName(table); err != nil {
		panic(&idemstore.ConfigError{Handler: "dynamo.New", Option: "table name", Err: err})
	}
	s := &Store{client: client, table: table, errLimit: DefaultLastErrorBytes, inlineLimit: DefaultInlineResultBytes}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// maxClaimRounds bounds the requests of one claim. Each round is a
// conditional write based on the item the previous round returned; only a
// record that changes under us between rounds needs more than two.
const maxClaimRounds = 4

type claimStep int

const (
	stepClaim    claimStep = iota // absent, or FAILED with the same hash
	stepTakeover                  // IN_PROGRESS whose lease ran out, same hash
	stepRecreate                  // expired: a fresh generation
)

// Claim takes the lease on a key. The common cases (absent, FAILED) take one
// UpdateItem; a takeover of an abandoned lease and the re-creation of an
// expired record take a second request, conditioned on the item the first
// one returned. See the package documentation for why.
func (s *Store) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.ClaimResult{}, err
	}
	if err := checkField("payload hash", req.PayloadHash); err != nil {
		return idemstore.ClaimResult{}, err
	}
	if err := checkField("message ID", req.MessageID); err != nil {
		return idemstore.ClaimResult{}, err
	}
	c := &claimCall{s: s, req: req, pk: pk, token: rand.Text()}
	step, seen := stepClaim, item(nil)
	for range maxClaimRounds {
		var got item
		switch step {
		case stepClaim:
			got, err = c.claim(ctx)
		case stepTakeover:
			got, err = c.takeover(ctx, seen)
		case stepRecreate:
			got, err = c.recreate(ctx, seen)
		}
		if err == nil {
			return c.claimed(step, got), nil
		}
		old, ok := conditionFailed(err)
		if !ok {
			return idemstore.ClaimResult{}, classify("claim", pk, err)
		}
		if old != nil && old.str(attrToken) == c.token {
			// The SDK retried a request whose first try applied but whose
			// response was lost: the token is fresh, so only our own write
			// can have put it there (docs/design.md, rule 1).
			return c.claimed(step, old), nil
		}
		next, claimable := c.decide(old)
		if !claimable {
			// A replay needs the result; a conflict does not.
			rec, err := s.withResult(ctx, old, req.Now, old.str(attrHash) == req.PayloadHash)
			if err != nil {
				return idemstore.ClaimResult{}, err
			}
			return idemstore.ClaimResult{Record: rec}, nil
		}
		step, seen = next, old
	}
	return idemstore.ClaimResult{}, fmt.Errorf("%w: dynamo claim %q: the record changed under each of %d conditional writes", idemstore.ErrStoreUnavailable, pk, maxClaimRounds)
}

type claimCall struct {
	s     *Store
	req   idemstore.ClaimRequest
	pk    string
	token string
}

// decide picks the next write from the item a refused write returned, or
// reports that the item refuses the claim. A nil item is absent.
func (c *claimCall) decide(old item) (claimStep, bool) {
	switch {
	case old == nil:
		return stepClaim, true
	case old.expiredAt(c.req.Now):
		return stepRecreate, true
	case old.str(attrHash) != c.req.PayloadHash:
		return 0, false
	}
	switch idemstore.Status(old.str(attrStatus)) {
	case idemstore.StatusFailed:
		return stepClaim, true
	case idemstore.StatusInProgress:
		if !c.req.NoTakeover && old.leaseExpiredAt(c.req.Now, c.req.Grace) {
			return stepTakeover, true
		}
	}
	return 0, false
}

// claimed builds the result of the write step that applied.
func (c *claimCall) claimed(step claimStep, it item) idemstore.ClaimResult {
	rec := it.record()
	var prev idemstore.Status
	switch step {
	case stepTakeover:
		prev = idemstore.StatusInProgress
	case stepClaim:
		// The plain claim applies to an absent or a FAILED record only, and
		// it starts a generation exactly when the claim counter is 1: so
		// the counter tells the previous state without returning the old
		// item as well.
		if rec.Fence.Claim > 1 {
			prev = idemstore.StatusFailed
		}
	}
	return idemstore.ClaimResult{Claimed: true, Lease: rec.Lease(), Previous: prev, Record: rec}
}

// setLease writes what every claim writes.
func (c *claimCall) setLease(e *expr) {
	inProgress := strAV(string(idemstore.StatusInProgress))
	e.Set(attrStatus, inProgress)
	e.Set(attrOpenStatus, inProgress)
	e.Set(attrToken, strAV(c.token))
	e.Set(attrLeaseUntil, numAV(ceilMillis(c.req.LeaseUntil)))
	e.Set(attrHash, strAV(c.req.PayloadHash))
	e.SetOrRemove(attrMessageID, c.req.MessageID)
	setExpiry(e, c.req.ExpiresAt)
	e.Set(attrUpdatedAt, numAV(ceilMillis(c.req.Now)))
	e.Set(attrSchema, numAV(idemstore.SchemaVersion))
}

// claim is the common claim: absent, or FAILED with the same hash.
func (c *claimCall) claim(ctx context.Context) (item, error) {
	e := newExpr()
	c.setLease(e)
	e.SetIfNotExists(attrGeneration, strAV(rand.Text()))
	e.SetIfNotExists(attrFirstAttempt, numAV(ceilMillis(c.req.Now)))
	e.Add(attrAttempts, 1)
	e.Add(attrClaim, 1)
	sameHash := e.n(attrHash) + " = " + e.s(c.req.PayloadHash)
	if mutant.On("dynamo-failed-reclaimed-by-other-payload") {
		sameHash = "(" + sameHash + " OR attribute_exists(" + e.n(attrHash) + "))" // a FAILED record claimed by any payload
	}
	cond := "attribute_not_exists(" + e.n(attrPK) + ") OR (" +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusFailed)) + " AND " + sameHash + " AND " +
		e.unexpired(ceilSecs(c.req.Now)) + ")"
	return c.s.update(ctx, c.pk, e, cond)
}

// takeover claims an IN_PROGRESS record whose lease ran out, fenced on the
// token it was seen with, and counts the abandoned attempt in takeovers.
func (c *claimCall) takeover(ctx context.Context, seen item) (item, error) {
	e := newExpr()
	c.setLease(e)
	e.Add(attrAttempts, 1)
	e.Add(attrClaim, 1)
	e.Add(attrTakeovers, 1)
	cond := e.n(attrToken) + " = " + e.s(seen.str(attrToken)) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusInProgress)) + " AND " +
		e.n(attrLeaseUntil) + " < " + e.num(ceilMillis(c.req.Now.Add(-c.req.Grace))) + " AND " +
		e.n(attrHash) + " = " + e.s(c.req.PayloadHash) + " AND " +
		e.unexpired(ceilSecs(c.req.Now))
	return c.s.update(ctx, c.pk, e, cond)
}

// recreate replaces an expired record with a fresh generation, conditioned
// on the expiry it was seen with: if anyone replaced it meanwhile, the
// condition fails and the next round looks at their item.
func (c *claimCall) recreate(ctx context.Context, seen item) (item, error) {
	now := ceilMillis(c.req.Now)
	it := item{
		attrPK:           strAV(c.pk),
		attrSchema:       numAV(idemstore.SchemaVersion),
		attrStatus:       strAV(string(idemstore.StatusInProgress)),
		attrOpenStatus:   strAV(string(idemstore.StatusInProgress)),
		attrToken:        strAV(c.token),
		attrLeaseUntil:   numAV(ceilMillis(c.req.LeaseUntil)),
		attrAttempts:     numAV(1),
		attrTakeovers:    numAV(0),
		attrGeneration:   strAV(rand.Text()),
		attrClaim:        numAV(1),
		attrHash:         strAV(c.req.PayloadHash),
		attrFirstAttempt: numAV(now),
		attrUpdatedAt:    numAV(now),
	}
	if c.req.MessageID != "" {
		it[attrMessageID] = strAV(c.req.MessageID)
	}
	if !c.req.ExpiresAt.IsZero() {
		it[attrExpiresAt] = numAV(ceilSecs(c.req.ExpiresAt))
	}
	e := newExpr()
	cond := e.n(attrExpiresAt) + " = " + e.v(seen[attrExpiresAt])
	_, err := c.s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(c.s.table),
		Item:                                it,
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// setExpiry sets expires_at, or removes it for a zero time (never expires).
func setExpiry(e *expr, t time.Time) {
	if t.IsZero() {
		e.Remove(attrExpiresAt)
		return
	}
	e.Set(attrExpiresAt, numAV(ceilSecs(t)))
}

// Complete moves a leased record to COMPLETED with its result. Without
// Writes and with a result of at most WithInlineResultBytes it is one
// UpdateItem; otherwise one TransactWriteItems that also puts the result
// item and commits the Writes (see the package documentation).
func (s *Store) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	pk, err := pkOf(req.Lease.Namespace, req.Lease.Key)
	if err != nil {
		return err
	}
	if len(req.Result) > MaxResultBytes {
		return fmt.Errorf("%w: dynamo complete %q: result of %d bytes, over the %d a result item holds",
			idemstore.ErrResultTooLarge, pk, len(req.Result), MaxResultBytes)
	}
	e := newExpr()
	e.Set(attrStatus, strAV(string(idemstore.StatusCompleted)))
	// Leaving the sparse index: a completed record is nobody's worry.
	e.Remove(attrOpenStatus)
	var apart *types.Put
	switch {
	case len(req.Result) > s.inlineLimit || s.itemBound(pk)+len(attrResult)+len(req.Result) > maxItemBytes:
		apart = s.resultPut(pk, req)
		e.Remove(attrResult)
		e.Set(attrResultApart, numAV(int64(len(req.Result))))
	case len(req.Result) > 0:
		e.Set(attrResult, &types.AttributeValueMemberB{Value: req.Result})
		e.Remove(attrResultApart)
	default:
		e.Remove(attrResult)
		e.Remove(attrResultApart)
	}
	if req.ResultUntil.IsZero() {
		e.Remove(attrResultUntil)
	} else {
		e.Set(attrResultUntil, numAV(ceilSecs(req.ResultUntil)))
	}
	setExpiry(e, req.ExpiresAt)
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	if len(req.Writes) > 0 || apart != nil {
		return s.completeTx(ctx, pk, req, e, apart)
	}
	return s.finish(ctx, "complete", pk, req.Lease, req.Now, idemstore.StatusCompleted, e)
}

// Fail moves a leased record to FAILED, keeping the token.
func (s *Store) Fail(ctx context.Context, req idemstore.FailRequest) error {
	pk, err := pkOf(req.Lease.Namespace, req.Lease.Key)
	if err != nil {
		return err
	}
	failed := strAV(string(idemstore.StatusFailed))
	e := newExpr()
	e.Set(attrStatus, failed)
	e.Set(attrOpenStatus, failed)
	e.SetOrRemove(attrLastError, truncate(req.Error, s.errLimit))
	e.Remove(attrDLReason) // no dead-lettering pending
	e.Remove(attrDLSourceID)
	setExpiry(e, req.ExpiresAt)
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	return s.finish(ctx, "fail", pk, req.Lease, req.Now, idemstore.StatusFailed, e)
}

// DeadLetter moves a leased record to DEAD_LETTERED with its reason.
func (s *Store) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	pk, err := pkOf(req.Lease.Namespace, req.Lease.Key)
	if err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"reason", string(req.Reason)},
		{"message ID", req.MessageID},
		{"dead-letter message ID", req.DeadLetterMessageID},
	} {
		if err := checkField(f.name, f.v); err != nil {
			return err
		}
	}
	if req.Pending {
		// Confirm the lease before the copy is sent: fenced like any
		// write, it keeps the record IN_PROGRESS.
		e := newExpr()
		e.SetOrRemove(attrDLReason, string(req.Reason))
		e.SetOrRemove(attrLastError, truncate(req.Error, s.errLimit))
		e.SetOrRemove(attrDLSourceID, req.MessageID)
		e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
		return s.finish(ctx, "dead-letter (pending)", pk, req.Lease, req.Now, idemstore.StatusInProgress, e)
	}
	dl := strAV(string(idemstore.StatusDeadLettered))
	e := newExpr()
	e.Set(attrStatus, dl)
	e.Set(attrOpenStatus, dl)
	e.SetOrRemove(attrDLReason, string(req.Reason))
	e.SetOrRemove(attrLastError, truncate(req.Error, s.errLimit))
	e.SetOrRemove(attrDLSourceID, req.MessageID)
	e.SetOrRemove(attrDLCopyID, req.DeadLetterMessageID)
	setExpiry(e, req.ExpiresAt)
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	return s.finish(ctx, "dead-letter", pk, req.Lease, req.Now, idemstore.StatusDeadLettered, e)
}

// Extend moves the end of a lease the caller still holds.
func (s *Store) Extend(ctx context.Context, req idemstore.ExtendRequest) error {
	pk, err := pkOf(req.Lease.Namespace, req.Lease.Key)
	if err != nil {
		return err
	}
	e := newExpr()
	until := ceilMillis(req.LeaseUntil)
	e.Set(attrLeaseUntil, numAV(until))
	if !req.ExpiresAt.IsZero() {
		setExpiry(e, req.ExpiresAt)
	}
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	// An extension never moves the lease's end back: one held in the
	// network that lands after a later one would let another claimer take
	// the key over while its holder runs under the later end.
	cond := leaseCondition(e, req.Lease, req.Now) + " AND " + e.n(attrLeaseUntil) + " <= " + e.num(until)
	old, refusedByCond, err := s.fencedUpdate(ctx, "extend", pk, e, cond)
	if !refusedByCond {
		return err
	}
	if old != nil && !old.expiredAt(req.Now) && old.str(attrToken) == req.Lease.Token &&
		idemstore.Status(old.str(attrStatus)) == idemstore.StatusInProgress {
		return nil // still ours, and a later extension applied first
	}
	return refused("extend", pk, req.Lease, req.Now, idemstore.StatusInProgress, old)
}

// leaseCondition is the fence of every write after a claim: our token, still
// IN_PROGRESS, not expired.
func leaseCondition(e *expr, l idemstore.Lease, now time.Time) string {
	return e.n(attrToken) + " = " + e.s(l.Token) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusInProgress)) + " AND " +
		e.unexpired(ceilSecs(now))
}

// finish sends a fenced update of a leased record.
func (s *Store) finish(ctx context.Context, op, pk string, l idemstore.Lease, now time.Time, target idemstore.Status, e *expr) error {
	old, refusedByCond, err := s.fencedUpdate(ctx, op, pk, e, leaseCondition(e, l, now))
	if !refusedByCond {
		return err
	}
	return refused(op, pk, l, now, target, old)
}

// fencedUpdate sends e under cond. refusedByCond reports that cond failed,
// with the item as it was (nil when absent); any other failure is err,
// classified.
func (s *Store) fencedUpdate(ctx context.Context, op, pk string, e *expr, cond string) (old item, refusedByCond bool, err error) {
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil, false, nil
	}
	old, ok := conditionFailed(err)
	if !ok {
		return nil, false, classify(op, pk, err)
	}
	return old, true, nil
}

// refused explains a failed lease condition. An item that carries our token
// and already has the target state is our own write, applied by a try whose
// response was lost (docs/design.md, rule 1): success. Anything else is a lost lease.
func refused(op, pk string, l idemstore.Lease, now time.Time, target idemstore.Status, old item) error {
	var why string
	switch {
	case old == nil:
		why = "the record is gone"
	case old.expiredAt(now):
		why = "the record expired"
	case old.str(attrToken) != l.Token:
		r := old.record()
		why = fmt.Sprintf("the lease was taken over (now %s, claim %d of generation %s)", r.Status, r.Fence.Claim, r.Fence.Generation)
	case idemstore.Status(old.str(attrStatus)) == target && target != idemstore.StatusInProgress:
		return nil
	default:
		why = "the record is already " + old.str(attrStatus)
	}
	return fmt.Errorf("%w: dynamo %s %q: %s", idemstore.ErrLeaseLost, op, pk, why)
}

// itemBound bounds the size of a record's item apart from its result: the
// key, the bounded caller strings, last_error, an operator's resolution
// note (kept while the key runs again) and fixed attributes.
func (s *Store) itemBound(pk string) int {
	return len(attrPK) + len(pk) + 2*maxFieldBytes + len(attrLastError) + s.errLimit +
		len(attrResolutionNote) + idemstore.MaxResolutionNoteBytes + itemOverheadBytes
}

// Get reads a record with a strongly consistent read.
func (s *Store) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyOf(pk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return idemstore.Record{}, classify("get", pk, err)
	}
	it := item(out.Item)
	if len(it) == 0 || it.expiredAt(req.Now) {
		return idemstore.Record{}, fmt.Errorf("%w: %q", idemstore.ErrNotFound, pk)
	}
	return s.withResult(ctx, it, req.Now, true)
}

// Delete removes a record unconditionally.
func (s *Store) Delete(ctx context.Context, req idemstore.DeleteRequest) error {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table),
		Key:       keyOf(pk),
	})
	if err != nil {
		return classify("delete", pk, err)
	}
	return nil
}
