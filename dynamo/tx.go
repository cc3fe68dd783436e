package dynamo

import (
	"context"
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

// DynamoDB's transaction and expression limits.
const (
	maxTxActions   = 100
	maxTxBytes     = 4 * 1024 * 1024
	maxExprBytes   = 4 * 1024 // a condition, update or projection expression
	maxPlaceholder = 255      // an expression attribute name or value's placeholder
)

// Cancellation codes that mean "try again", not "refused".
var transientCancel = map[string]bool{
	"TransactionConflict":           true,
	"ThrottlingError":               true,
	"ProvisionedThroughputExceeded": true,
}

// completeTx commits the completion update, the caller's writes and the
// result item (when the result is stored apart) in one TransactWriteItems.
// The completion is action 0; write i is action i+1; the result item is
// the last action.
func (s *Store) completeTx(ctx context.Context, pk string, req idemstore.CompleteRequest, e *expr, apart *types.Put) error {
	own := &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 aws.String(leaseCondition(e, req.Lease, req.Now)),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	actions := make([]types.TransactWriteItem, 0, len(req.Writes)+1)
	actions = append(actions, types.TransactWriteItem{Update: own})
	for i, w := range req.Writes {
		switch w := w.(type) {
		case types.TransactWriteItem:
			actions = append(actions, w)
		case *types.TransactWriteItem:
			if w == nil {
				return fmt.Errorf("%w: write %d is a nil *types.TransactWriteItem", ErrTransactionLimit, i)
			}
			actions = append(actions, *w)
		default:
			return fmt.Errorf("%w: write %d is a %T; the DynamoDB store commits types.TransactWriteItem values", idemstore.ErrUnsupportedWrite, i, w)
		}
	}
	if err := s.checkTx(pk, actions, apart); err != nil {
		return fmt.Errorf("dynamo complete %q: %w", pk, err)
	}
	if apart != nil {
		actions = append(actions, types.TransactWriteItem{Put: apart})
	}
	// The SDK fills ClientRequestToken once per call, so its own retries of
	// a transaction that applied are answered as success by DynamoDB; the
	// cancellation analysis below covers what falls outside that window.
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		if refusedForShape(err) {
			// Item-size and "multiple operations on one item" refusals of
			// a transaction cannot be pinned on the result alone.
			return fmt.Errorf("%w: dynamo complete %q: %w", ErrTransactionLimit, pk, err)
		}
		return classify("complete", pk, err)
	}
	return cancellation(pk, req, tce, apart != nil)
}

// cancellation explains a canceled transaction from its per-action reasons.
// apart says the last action is the result item's put.
func cancellation(pk string, req idemstore.CompleteRequest, tce *types.TransactionCanceledException, apart bool) error {
	txErr := &TransactionError{}
	transient := false
	var ownReason *types.CancellationReason
	for i, r := range tce.CancellationReasons {
		code := aws.ToString(r.Code)
		if code == "" || code == "None" {
			continue
		}
		if i == 0 {
			ownReason = &tce.CancellationReasons[0]
			continue
		}
		if apart && i == len(req.Writes)+1 {
			// The result item's unconditional put: only a passing
			// reason can refuse it.
			transient = transient || transientCancel[code]
			if !transientCancel[code] {
				txErr.Failures = append(txErr.Failures, WriteFailure{Index: -1, Code: code, Message: "result item: " + aws.ToString(r.Message)})
			}
			continue
		}
		transient = transient || transientCancel[code]
		txErr.Failures = append(txErr.Failures, WriteFailure{Index: i - 1, Code: code, Message: aws.ToString(r.Message), Item: r.Item})
	}
	if ownReason != nil {
		code := aws.ToString(ownReason.Code)
		if code == "ConditionalCheckFailed" {
			err := refused("complete", pk, req.Lease, req.Now, idemstore.StatusCompleted, item(ownReason.Item))
			if err == nil {
				// The record is COMPLETED under our token, which only this
				// transaction writes: an earlier try of it applied, with
				// every write in it.
				return nil
			}
			if len(txErr.Failures) > 0 {
				return fmt.Errorf("%w; also %w", err, txErr)
			}
			return err
		}
		transient = transient || transientCancel[code]
		if !transient {
			txErr.Failures = append(txErr.Failures, WriteFailure{Index: -1, Code: code, Message: aws.ToString(ownReason.Message)})
		}
	}
	if transient && !slices.ContainsFunc(txErr.Failures, func(f WriteFailure) bool { return !transientCancel[f.Code] }) {
		return fmt.Errorf("%w: dynamo complete %q: %w", idemstore.ErrStoreUnavailable, pk, tceOr(txErr, tce))
	}
	if len(txErr.Failures) == 0 {
		return fmt.Errorf("%w: dynamo complete %q: %w", idemstore.ErrStoreUnavailable, pk, tce)
	}
	return fmt.Errorf("dynamo complete %q: %w", pk, txErr)
}

// refusedForShape reports whether a transaction was refused for what it
// holds, on every try alike: DynamoDB's ValidationException, or the SDK's
// own check of required parameters, which never sends the request. Either
// is a write the store could not commit, never a store unavailable.
func refusedForShape(err error) bool {
	var ae smithy.APIError
	var ip smithy.InvalidParamsError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" || errors.As(err, &ip)
}

func tceOr(txErr *TransactionError, tce error) error {
	if len(txErr.Failures) > 0 {
		return txErr
	}
	return tce
}

// checkTx enforces DynamoDB's transaction limits before sending, so the
// caller learns which rule it broke instead of a generic ValidationException.
// apart is the result item's put, counted but not yet among actions.
func (s *Store) checkTx(pk string, actions []types.TransactWriteItem, apart *types.Put) error {
	size, n := s.itemBound(pk), len(actions)
	if apart != nil {
		size += mapSize(apart.Item)
		n++
	}
	if n > maxTxActions {
		return fmt.Errorf("%w: %d writes make %d actions with the completion (and its result item), over DynamoDB's %d", ErrTransactionLimit, len(actions)-1, n, maxTxActions)
	}
	type target struct {
		index int
		table string
		key   map[string]types.AttributeValue // nil for a Put
		item  map[string]types.AttributeValue // the Put's item
	}
	targets := []target{{index: -1, table: s.table, key: keyOf(pk)}}
	for i, a := range actions[1:] {
		var t target
		n := 0
		if a.Put != nil {
			n++
			t = target{table: aws.ToString(a.Put.TableName), item: a.Put.Item}
			isz := mapSize(a.Put.Item)
			if isz > maxItemBytes {
				return fmt.Errorf("%w: write %d puts an item of about %d bytes, over DynamoDB's %d", ErrTransactionLimit, i, isz, maxItemBytes)
			}
			size += isz + mapSize(a.Put.ExpressionAttributeValues)
		}
		if a.Update != nil {
			n++
			t = target{table: aws.ToString(a.Update.TableName), key: a.Update.Key}
			size += mapSize(a.Update.Key) + mapSize(a.Update.ExpressionAttributeValues)
		}
		if a.Delete != nil {
			n++
			t = target{table: aws.ToString(a.Delete.TableName), key: a.Delete.Key}
			size += mapSize(a.Delete.Key) + mapSize(a.Delete.ExpressionAttributeValues)
		}
		if a.ConditionCheck != nil {
			n++
			t = target{table: aws.ToString(a.ConditionCheck.TableName), key: a.ConditionCheck.Key}
			size += mapSize(a.ConditionCheck.Key) + mapSize(a.ConditionCheck.ExpressionAttributeValues)
		}
		if n != 1 {
			return fmt.Errorf("%w: write %d must hold exactly one of Put, Update, Delete or ConditionCheck, has %d", ErrTransactionLimit, i, n)
		}
		if err := checkAction(i, a); err != nil {
			return err
		}
		t.index = i
		for _, o := range targets {
			if o.table == t.table && sameItem(o.key, o.item, t.key, t.item) {
				return fmt.Errorf("%w: write %d targets the same item as %s (one action per item)", ErrTransactionLimit, i, describe(o.index))
			}
		}
		targets = append(targets, t)
	}
	if size > maxTxBytes {
		return fmt.Errorf("%w: the transaction is about %d bytes, over DynamoDB's %d", ErrTransactionLimit, size, maxTxBytes)
	}
	return nil
}

// checkWrite is the store's check of the completion writes a handler has
// added (idemstore.Capabilities.CheckWrite): the limits of the transaction
// they will join, as checkTx applies them when it is sent, so a handler
// learns of a write DynamoDB would refuse when it adds it. A result stored
// apart (a large Wrap result) takes one more action at the completion.
func (s *Store) checkWrite(lease idemstore.Lease, writes []any) error {
	pk, err := pkOf(lease.Namespace, lease.Key)
	if err != nil {
		return err
	}
	actions := make([]types.TransactWriteItem, 1, len(writes)+1) // the completion's own, checked apart
	for i, w := range writes {
		switch w := w.(type) {
		case types.TransactWriteItem:
			actions = append(actions, w)
		case *types.TransactWriteItem:
			if w == nil {
				return fmt.Errorf("%w: write %d is a nil *types.TransactWriteItem", ErrTransactionLimit, i)
			}
			actions = append(actions, *w)
		default:
			return fmt.Errorf("%w: write %d is a %T; the DynamoDB store commits types.TransactWriteItem values", idemstore.ErrUnsupportedWrite, i, w)
		}
	}
	return s.checkTx(pk, actions, nil)
}

func describe(index int) string {
	if index < 0 {
		return "the record's own completion"
	}
	return fmt.Sprintf("write %d", index)
}

// sameItem reports whether two actions surely target one item. A key is
// compared with a key, or looked up in a Put's item (a key's attributes
// are the item's key attributes). Two Puts cannot be compared without the
// table's key schema; DynamoDB refuses those itself.
func sameItem(k1, it1, k2, it2 map[string]types.AttributeValue) bool {
	switch {
	case k1 != nil && k2 != nil:
		return len(k1) == len(k2) && containsKey(k2, k1)
	case k1 != nil:
		return containsKey(it2, k1)
	case k2 != nil:
		return containsKey(it1, k2)
	}
	return false
}

// containsKey reports whether m holds every attribute of key with an equal
// value.
func containsKey(m, key map[string]types.AttributeValue) bool {
	for name, v := range key {
		if !keyValueEqual(m[name], v) {
			return false
		}
	}
	return true
}

// keyValueEqual compares key attribute values (S, N or B).
func keyValueEqual(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && strings.TrimSpace(a.Value) == strings.TrimSpace(b.Value)
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && string(a.Value) == string(b.Value)
	}
	return false
}
