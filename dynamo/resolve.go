package dynamo

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Resolve records an operator's decision on a record whose outcome is
// unknown, in one UpdateItem conditioned on the token and dead-letter copy
// the operator read, status DEAD_LETTERED with reason outcome_unknown, no
// abandonment and no expiry. A refusal returns the record from the same
// request (ALL_OLD). See [idemstore.Admin].
func (a *Admin) Resolve(ctx context.Context, req idemstore.ResolveRequest) (idemstore.Record, error) {
	pk, err := pkOf(req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if err := idemstore.CheckResolve(req); err != nil {
		return idemstore.Record{}, fmt.Errorf("dynamo: %q: %w", pk, err)
	}
	// A fresh token: it fences out any late write under an older lease, and
	// it is how a retried request recognises its own applied write.
	token := "resolved-" + rand.Text()
	note := req.StoredNote()
	e := newExpr()
	e.Set(attrToken, strAV(token))
	e.Set(attrResolution, strAV(string(req.Decision)))
	e.Set(attrResolutionNote, strAV(note))
	e.Set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	switch req.Decision {
	case idemstore.ResolutionApplied:
		e.Set(attrStatus, strAV(string(idemstore.StatusCompleted)))
		e.Remove(attrOpenStatus)
		if len(req.Result) > 0 {
			e.Set(attrResult, &types.AttributeValueMemberB{Value: req.Result})
		} else {
			e.Remove(attrResult)
		}
		e.Remove(attrResultApart)
		e.Remove(attrResultUntil)
		e.Remove(attrDLReason)
		e.Remove(attrDLSourceID)
		e.Remove(attrDLCopyID)
	case idemstore.ResolutionNotApplied:
		failed := strAV(string(idemstore.StatusFailed))
		e.Set(attrStatus, failed)
		e.Set(attrOpenStatus, failed)
		e.Set(attrAttempts, numAV(0))
		e.SetOrRemove(attrRedrivenFrom, req.DeadLetterMessageID)
		e.Set(attrLastError, strAV(truncate(note, a.errLimit)))
		e.Remove(attrDLReason)
		e.Remove(attrDLSourceID)
		e.Remove(attrDLCopyID)
		e.Add(attrRedrives, 1)
	}
	res := e.n(attrResolution)
	cond := e.n(attrToken) + " = " + e.s(req.Token) + " AND " +
		e.n(attrStatus) + " = " + e.s(string(idemstore.StatusDeadLettered)) + " AND " +
		e.n(attrDLReason) + " = " + e.s(string(idemstore.ReasonOutcomeUnknown)) + " AND " +
		"(attribute_not_exists(" + res + ") OR " + res + " <> " + e.s(string(idemstore.ResolutionAbandoned)) + ") AND " +
		e.unexpired(ceilSecs(req.Now)) + " AND "
	if req.DeadLetterMessageID == "" {
		cond += "attribute_not_exists(" + e.n(attrDLCopyID) + ")"
	} else {
		cond += e.n(attrDLCopyID) + " = " + e.s(req.DeadLetterMessageID)
	}
	rec, refused, err := a.tokenUpdate(ctx, "resolve", pk, e, cond, token, req.Now)
	if err != nil || refused == nil {
		return rec, err
	}
	return *refused, refusal("resolve", pk, idemstore.ResolveRefusal(*refused, req))
}
