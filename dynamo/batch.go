package dynamo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Batcher = (*Store)(nil)

// StatementAPI is the PartiQL call the store's batched completions use.
// *dynamodb.Client has it; a client given to New as an [API] without it
// completes a batch one UpdateItem per record.
type StatementAPI interface {
	BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

var _ StatementAPI = (*dynamodb.Client)(nil)

// maxStatements is DynamoDB's limit of statements in one
// BatchExecuteStatement.
const maxStatements = 25

// ClaimBatch claims several keys; see [idemstore.Batcher].
//
// It sends one TransactWriteItems of up to 100 puts, each the fresh
// record a claim of an absent key writes, conditioned on the key being
// absent: the records of a batch's first deliveries. A transaction
// reports per action why it was cancelled, with the item that refused it
// (ALL_OLD), so a key that is a duplicate, in progress elsewhere, a
// conflict or dead-lettered is answered from that item with no further
// request, and the transaction is sent again without it. A key the item
// shows to be claimable anyway (FAILED, an abandoned lease, an expired
// record) is claimed on its own, as Claim does; so is a key that appears
// twice, after the first.
//
// PartiQL's BatchExecuteStatement was measured against this on DynamoDB
// Local and not chosen for claims. Its UPDATE cannot create an item. Its
// INSERT refuses an existing item without returning it, so a batch
// holding duplicates needs a second request, a read of the refused keys,
// where the transaction's cancellation reasons already carry them: a
// redelivered batch of ten took about twice as long (INSERTs and a batch
// of consistent SELECTs, against one cancelled transaction), and a batch
// of ten new keys 1.2 to 1.4 times as long (DynamoDB Local works through
// the statements of a batch one by one at more cost per item than
// through the items of one transaction, which took 0.8 × the time of ten
// claims side by side). The transaction's price is write units: two per
// record where a claim's UpdateItem, or an INSERT, costs one
// (docs/stores.md compares the modes).
func (s *Store) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	out := make([]idemstore.BatchClaim, len(reqs))
	type pending struct {
		i     int
		pk    string
		token string
		item  item
	}
	var alone []int
	seen := map[string]bool{}
	var todo []pending
	for i, req := range reqs {
		pk, err := pkOf(req.Namespace, req.Key)
		if err == nil {
			err = checkField("payload hash", req.PayloadHash)
		}
		if err == nil {
			err = checkField("message ID", req.MessageID)
		}
		switch {
		case err != nil:
			out[i].Err = err
		case seen[pk]:
			alone = append(alone, i)
		default:
			seen[pk] = true
			token := rand.Text()
			todo = append(todo, pending{i: i, pk: pk, token: token, item: freshClaim(pk, token, req)})
		}
	}
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), maxTxActions)]
		todo = todo[len(chunk):]
		for round := 0; len(chunk) > 0; round++ {
			if round == maxClaimRounds {
				for _, p := range chunk {
					alone = append(alone, p.i)
				}
				break
			}
			actions := make([]types.TransactWriteItem, len(chunk))
			for k, p := range chunk {
				e := newExpr()
				actions[k] = types.TransactWriteItem{Put: &types.Put{
					TableName:                           aws.String(s.table),
					Item:                                p.item,
					ConditionExpression:                 aws.String("attribute_not_exists(" + e.n(attrPK) + ")"),
					ExpressionAttributeNames:            e.names,
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				}}
			}
			_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
			if err == nil {
				for _, p := range chunk {
					rec := p.item.record()
					out[p.i].Result = idemstore.ClaimResult{Claimed: true, Lease: rec.Lease(), Record: rec}
				}
				break
			}
			var tce *types.TransactionCanceledException
			if !errors.As(err, &tce) || len(tce.CancellationReasons) != len(chunk) {
				if errors.As(err, &tce) || isValidation(err) {
					// Not what a claim's condition says: let each claim
					// find out on its own.
					for _, p := range chunk {
						alone = append(alone, p.i)
					}
					break
				}
				for _, p := range chunk {
					out[p.i].Err = classify("claim", p.pk, err)
				}
				break
			}
			var again []pending
			for k, r := range tce.CancellationReasons {
				p := chunk[k]
				switch code := aws.ToString(r.Code); code {
				case "", "None":
					again = append(again, p)
				case "ConditionalCheckFailed":
					old := item(r.Item)
					c := &claimCall{s: s, req: reqs[p.i], pk: p.pk}
					if _, claimable := c.decide(old); claimable || len(old) == 0 {
						alone = append(alone, p.i)
						continue
					}
					req := reqs[p.i]
					rec, err := s.withResult(ctx, old, req.Now, old.str(attrHash) == req.PayloadHash)
					out[p.i] = idemstore.BatchClaim{Result: idemstore.ClaimResult{Record: rec}, Err: err}
				default:
					// A conflicting transaction, throttling: this key on
					// its own.
					alone = append(alone, p.i)
				}
			}
			chunk = again
		}
	}
	// In request order, so that two requests for one key are answered as
	// two claims one after the other would be.
	slices.Sort(alone)
	for _, i := range alone {
		res, err := s.Claim(ctx, reqs[i])
		out[i] = idemstore.BatchClaim{Result: res, Err: err}
	}
	return out
}

// freshClaim is the item a claim of an absent key writes.
func freshClaim(pk, token string, req idemstore.ClaimRequest) item {
	now := numAV(ceilMillis(req.Now))
	inProgress := strAV(string(idemstore.StatusInProgress))
	it := item{
		attrPK:           strAV(pk),
		attrSchema:       numAV(idemstore.SchemaVersion),
		attrStatus:       inProgress,
		attrOpenStatus:   inProgress,
		attrToken:        strAV(token),
		attrLeaseUntil:   numAV(ceilMillis(req.LeaseUntil)),
		attrAttempts:     numAV(1),
		attrTakeovers:    numAV(0),
		attrGeneration:   strAV(rand.Text()),
		attrClaim:        numAV(1),
		attrHash:         strAV(req.PayloadHash),
		attrFirstAttempt: now,
		attrUpdatedAt:    now,
	}
	if req.MessageID != "" {
		it[attrMessageID] = strAV(req.MessageID)
	}
	if !req.ExpiresAt.IsZero() {
		it[attrExpiresAt] = numAV(ceilSecs(req.ExpiresAt))
	}
	return it
}

func isValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

// CompleteBatch completes several leases; see [idemstore.Batcher].
//
// Completions without writes whose result fits on the record go out as
// PartiQL UPDATE statements, up to 25 in one BatchExecuteStatement: each
// statement carries its own lease condition and is answered on its own,
// a refused one with the item that refused it (ALL_OLD), so one lost lease
// changes nothing for the others and costs no further request, and each
// costs one write unit, as the single UpdateItem does. A completion with
// writes or a result kept apart is a transaction of its own, as Complete
// sends it; so is every completion when the client lacks
// BatchExecuteStatement ([StatementAPI]).
//
// On DynamoDB Local the ten statements took 1.2 to 1.4 times as long as
// ten UpdateItems side by side on a quiet two-core machine: one request
// runs its statements in turn on one thread where ten requests share the
// cores. That is the half of a batched batch that is slower there. One
// transaction of the ten updates took 0.9 × the ten UpdateItems' time
// and was not chosen: it costs two write units per record where a
// statement costs one, and one lost lease would cancel the others'
// completions until they were sent again.
func (s *Store) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	type stmt struct {
		i  int
		pk string
		st types.BatchStatementRequest
	}
	var stmts []stmt
	var alone []int
	api, canBatch := s.client.(StatementAPI)
	seen := map[string]bool{}
	for i, req := range reqs {
		pk, err := pkOf(req.Lease.Namespace, req.Lease.Key)
		switch {
		case err != nil:
			errs[i] = err
		case !canBatch || len(req.Writes) > 0 || len(req.Result) > s.inlineLimit ||
			s.itemBound(pk)+len(attrResult)+len(req.Result) > maxItemBytes || seen[pk]:
			alone = append(alone, i)
		default:
			seen[pk] = true
			stmts = append(stmts, stmt{i: i, pk: pk, st: s.completeStatement(pk, req)})
		}
	}
	for len(stmts) > 0 {
		chunk := stmts[:min(len(stmts), maxStatements)]
		stmts = stmts[len(chunk):]
		in := &dynamodb.BatchExecuteStatementInput{Statements: make([]types.BatchStatementRequest, len(chunk))}
		for k, c := range chunk {
			in.Statements[k] = c.st
		}
		out, err := api.BatchExecuteStatement(ctx, in)
		if err == nil && len(out.Responses) != len(chunk) {
			err = fmt.Errorf("%w: %d answers to %d statements", idemstore.ErrStoreUnavailable, len(out.Responses), len(chunk))
		}
		if err != nil {
			for _, c := range chunk {
				errs[c.i] = classify("complete", c.pk, err)
			}
			continue
		}
		for k, r := range out.Responses {
			c := chunk[k]
			req := reqs[c.i]
			switch {
			case r.Error == nil:
			case r.Error.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed:
				errs[c.i] = refused("complete", c.pk, req.Lease, req.Now, idemstore.StatusCompleted, item(r.Error.Item))
			case r.Error.Code == types.BatchStatementErrorCodeEnumValidationError:
				errs[c.i] = fmt.Errorf("dynamo complete %q: %s: %s", c.pk, r.Error.Code, aws.ToString(r.Error.Message))
			default:
				errs[c.i] = fmt.Errorf("%w: dynamo complete %q: %s: %s", idemstore.ErrStoreUnavailable, c.pk, r.Error.Code, aws.ToString(r.Error.Message))
			}
		}
	}
	for _, i := range alone {
		errs[i] = s.Complete(ctx, reqs[i])
	}
	return errs
}

// completeStatement is the PartiQL form of a completion that Complete
// would send as one UpdateItem: the same attributes, the same lease
// condition.
func (s *Store) completeStatement(pk string, req idemstore.CompleteRequest) types.BatchStatementRequest {
	var b strings.Builder
	var params []types.AttributeValue
	set := func(attr string, v types.AttributeValue) {
		fmt.Fprintf(&b, ` SET "%s" = ?`, attr)
		params = append(params, v)
	}
	remove := func(attr string) { fmt.Fprintf(&b, ` REMOVE "%s"`, attr) }
	fmt.Fprintf(&b, `UPDATE "%s"`, s.table)
	set(attrStatus, strAV(string(idemstore.StatusCompleted)))
	remove(attrOpenStatus)
	if len(req.Result) > 0 {
		set(attrResult, &types.AttributeValueMemberB{Value: req.Result})
	} else {
		remove(attrResult)
	}
	remove(attrResultApart)
	if req.ResultUntil.IsZero() {
		remove(attrResultUntil)
	} else {
		set(attrResultUntil, numAV(ceilSecs(req.ResultUntil)))
	}
	if req.ExpiresAt.IsZero() {
		remove(attrExpiresAt)
	} else {
		set(attrExpiresAt, numAV(ceilSecs(req.ExpiresAt)))
	}
	set(attrUpdatedAt, numAV(ceilMillis(req.Now)))
	fmt.Fprintf(&b, ` WHERE "%s" = ? AND "%s" = ? AND "%s" = ? AND ("%s" IS MISSING OR "%s" >= ?)`,
		attrPK, attrToken, attrStatus, attrExpiresAt, attrExpiresAt)
	params = append(params, strAV(pk), strAV(req.Lease.Token), strAV(string(idemstore.StatusInProgress)), numAV(ceilSecs(req.Now)))
	return types.BatchStatementRequest{
		Statement:                           aws.String(b.String()),
		Parameters:                          params,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
