package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Named errors of this store, in addition to those of package lambdaidem.
var (
	// ErrInvalidKey: the namespace, key or another stored string cannot be
	// stored: empty, a namespace containing "#", a partition key over
	// DynamoDB's 2048-byte limit, or a field over its bound.
	ErrInvalidKey = errors.New("dynamo: invalid key")
	// ErrTransactionLimit: a transactional completion breaks one of
	// DynamoDB's transaction limits (100 actions including the completion,
	// 4 MB, 400 KB an item, one action per item, 4 KB an expression, 255
	// bytes a placeholder, 2 MB of placeholders an action) or holds a
	// write DynamoDB or the SDK refuses for its form (see the package
	// documentation, "Transactional completion"). AddCompletionWrite
	// returns it for the write that breaks a limit, and nothing was sent;
	// a ValidationException of the transaction is reported with it too.
	ErrTransactionLimit = errors.New("dynamo: transaction limit")
	// ErrInvalidTableName: a table name DynamoDB would refuse on every
	// request (empty, an unset environment variable; shorter than 3 or
	// longer than 255 characters; a character other than letters, digits,
	// '_', '-' and '.'), or a table ARN that is not one. New refuses it
	// when called; see CheckTableName.
	ErrInvalidTableName error = invalidSetting("dynamo: invalid table name")
)

// invalidSetting is a named error of a setting a constructor refuses; it
// matches idemstore.ErrInvalidOption too.
type invalidSetting string

func (e invalidSetting) Error() string { return string(e) }

// Is reports whether target is idemstore.ErrInvalidOption.
func (e invalidSetting) Is(target error) bool { return target == idemstore.ErrInvalidOption }

// TransactionError reports which extra writes of a transactional completion
// made DynamoDB cancel the transaction. Nothing of the transaction was
// applied. The record's own update is not listed: its refusal is reported as
// [idemstore.ErrLeaseLost].
type TransactionError struct {
	// Failures lists the extra writes that were refused, in order.
	Failures []WriteFailure
}

// WriteFailure is one refused extra write.
type WriteFailure struct {
	// Index is the write's position in CompleteRequest.Writes.
	Index int
	// Code is DynamoDB's cancellation code, e.g. "ConditionalCheckFailed",
	// "TransactionConflict", "ValidationError".
	Code    string
	Message string
	// Item is the item as it was, when the write asked for it with
	// ReturnValuesOnConditionCheckFailure=ALL_OLD.
	Item map[string]types.AttributeValue
}

// Is makes errors.Is(err, idemstore.ErrWriteRefused) true: the
// transaction was refused for good (a write's condition failed, or a write
// was invalid), not cut short by a transient conflict, and nothing of it
// was written. lambdaidem.Wrap then leaves the key retryable and returns
// an error rather than the function's result.
func (e *TransactionError) Is(target error) bool {
	return target == idemstore.ErrWriteRefused && len(e.Failures) > 0
}

func (e *TransactionError) Error() string {
	var b strings.Builder
	b.WriteString("dynamo: transaction canceled:")
	for i, f := range e.Failures {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " write %d: %s", f.Index, f.Code)
		if f.Message != "" {
			fmt.Fprintf(&b, " (%s)", f.Message)
		}
	}
	return b.String()
}

// classify turns an SDK error into the store's vocabulary. What is
// transient or leaves the store unable to answer for us (throttling, 5xx,
// timeouts, connection failures, a canceled context, missing table or
// permission) is ErrStoreUnavailable: the decorator then reports the record
// failed and never acknowledges it. A ValidationException is a bad request,
// returned as it is, except the item-size one, which is ErrResultTooLarge.
func classify(op, pk string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		if isItemSizeMessage(ae.ErrorMessage()) {
			return fmt.Errorf("%w: dynamo %s %q: %w", idemstore.ErrResultTooLarge, op, pk, err)
		}
		return fmt.Errorf("dynamo %s %q: %w", op, pk, err)
	}
	return fmt.Errorf("%w: dynamo %s %q: %w", idemstore.ErrStoreUnavailable, op, pk, err)
}

// isItemSizeMessage recognises DynamoDB's "Item size has exceeded the
// maximum allowed size" and "Item size to update has exceeded ..." texts.
func isItemSizeMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "item size") && strings.Contains(m, "exceeded")
}

// conditionFailed returns the item a failed condition returned
// (ReturnValuesOnConditionCheckFailure=ALL_OLD; nil when there was no item)
// and whether err was a failed condition at all.
func conditionFailed(err error) (item, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return item(ccf.Item), true
	}
	return nil, false
}
