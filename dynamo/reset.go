package dynamo

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.DeadLetterResetter = (*Store)(nil)

// ResetDeadLetter makes a record dead-lettered by the given dead-letter
// copy claimable again, in one UpdateItem conditioned on status
// DEAD_LETTERED, dead_letter_message_id equal to the copy's ID, no
// operator's abandonment (resolution), the record not expired and (with
// MaxRedrives) redrives below the limit. A refusal
// returns the record from the same request (ALL_OLD), with no second read.
// See [idemstore.DeadLetterResetter].
func (s *Store) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if req.DeadLetterMessageID == "" {
		return idemstore.Record{}, fmt.Errorf("%w: dynamo reset %q: no dead-letter message ID", idemstore.ErrResetRefused, pk)
	}
	if err := checkField("dead-letter message ID", req.DeadLetterMessageID); err != nil {
		return idemstore.Record{}, err
	}
	note := req.Note
	if note == "" {
		note = idemstore.DefaultResetNote
	}
	// A fresh token: it fences out any late write under an older lease, and
	// it is how a retried request recognises its own applied write.
	token := "redriven-" + rand.Text()
	failed := strAV(string(idemstore.StatusFailed))
	e := newExpr()
	e.Set(attrStatus, failed)
	e.Set(attrOpenStatus, failed)
	e.Set(attrToken, strAV(token))
	e.Set(attrAttempts, numAV(0))
	e.Set(attrRedrivenFrom, strAV(req.DeadLetterMessageID))
	e.Set(attrLastError, strAV(truncate(note, s.errLimit)))
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	e.Remove(attrDLReason)
	e.Remove(attrDLSourceID)
	e.Remove(attrDLCopyID)
	e.Add(attrRedrives, 1)
	res := e.n(attrResolution)
	cond := e.n(attrStatus) + " = " + e.s(string(idemstore.StatusDeadLettered)) + " AND " +
		e.n(attrDLCopyID) + " = " + e.s(req.DeadLetterMessageID) + " AND " +
		"(attribute_not_exists(" + res + ") OR " + res + " <> " + e.s(string(idemstore.ResolutionAbandoned)) + ") AND " +
		e.unexpired(ceilSecs(req.Now))
	if req.MaxRedrives > 0 {
		n := e.n(attrRedrives)
		cond += " AND (attribute_not_exists(" + n + ") OR " + n + " < " + e.num(int64(req.MaxRedrives)) + ")"
	}
	rec, refused, err := s.tokenUpdate(ctx, "reset", pk, e, cond, token, req.Now)
	if err != nil || refused == nil {
		return rec, err
	}
	why := idemstore.ResetRefusal(*refused, req)
	if why == "" {
		why = "the record changed during the request"
	}
	return *refused, fmt.Errorf("%w: dynamo reset %q: %s", idemstore.ErrResetRefused, pk, why)
}

// update is one conditional UpdateItem of the item pk that returns the
// item as written, or, when its condition fails, an error that carries the
// item that refused it (ALL_OLD; see conditionFailed).
func (s *Store) update(ctx context.Context, pk string, e *expr, cond string) (item, error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, err
	}
	return item(out.Attributes), nil
}

// tokenUpdate is updateOrOld for a write that puts the fresh lease token
// token on the record: it returns the record as written, or the record
// that refused the write (refused), or idemstore.ErrNotFound when there is
// no unexpired record. A refusal by a record that carries token is the
// SDK's retry of a request whose first try applied (only this write can
// have put that token there): it returns that record as written.
func (s *Store) tokenUpdate(ctx context.Context, op, pk string, e *expr, cond, token string, now time.Time) (rec idemstore.Record, refused *idemstore.Record, err error) {
	rec, old, err := s.updateOrOld(ctx, op, pk, e, cond)
	switch {
	case err != nil || old == nil:
		return rec, nil, err
	case len(old) == 0 || old.expiredAt(now):
		return idemstore.Record{}, nil, fmt.Errorf("%w: %q", idemstore.ErrNotFound, pk)
	case old.str(attrToken) == token:
		return old.record(), nil, nil
	}
	r := old.record()
	return idemstore.Record{}, &r, nil
}

// updateOrOld is one conditional UpdateItem that returns the new item when
// it applies and the item that refused it (ALL_OLD) when its condition
// fails, so deciding what a refusal means never costs a read. old is nil
// when the update applied; a refusal of an absent item returns an empty,
// non-nil old. Any other failure is classified under op.
func (s *Store) updateOrOld(ctx context.Context, op, pk string, e *expr, cond string) (rec idemstore.Record, old item, err error) {
	it, err := s.update(ctx, pk, e, cond)
	if err == nil {
		return it.record(), nil, nil
	}
	old, ok := conditionFailed(err)
	if !ok {
		return idemstore.Record{}, nil, classify(op, pk, err)
	}
	if old == nil {
		old = item{}
	}
	return idemstore.Record{}, old, nil
}
