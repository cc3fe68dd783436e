package dynamotest_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// What the interpreter does not interpret is refused with an error that
// names it, never applied with other semantics.
func TestUnsupportedIsNamed(t *testing.T) {
	db := dynamotest.New(schema...)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"ADD on a nested attribute", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("balances"), Key: acct,
				UpdateExpression: aws.String("ADD doc.n :one"), ExpressionAttributeValues: vals(":one", n("1"))})
			return err
		}, "ADD on a nested attribute"},
		{"legacy Expected", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("balances"), Item: acct,
				Expected: map[string]types.ExpectedAttributeValue{"x": {Exists: aws.Bool(false)}}})
			return err
		}, "legacy parameters"},
		{"ReturnValues UPDATED_NEW", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("balances"), Key: acct,
				UpdateExpression: aws.String("SET a = :one"), ExpressionAttributeValues: vals(":one", n("1")), ReturnValues: types.ReturnValueUpdatedNew})
			return err
		}, "ReturnValues UPDATED_NEW"},
		{"a projection", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("balances"), Key: acct, ProjectionExpression: aws.String("a")})
			return err
		}, "a projection"},
	} {
		err := tc.call()
		if !errors.Is(err, dynamotest.ErrUnsupported) || !errors.Is(err, idemstore.ErrUnsupportedWrite) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrUnsupported naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("nope"), Item: acct}); !errors.Is(err, dynamotest.ErrNoTable) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown table: %v", err)
	}
}

// ApplyWrites commits the writes and the caller's completion together, or
// neither, and reports each refusal as the DynamoDB store does.
func TestApplyWrites(t *testing.T) {
	db := dynamotest.New(schema...)
	entryPut := put("ledger", with(e1, "amount", n("5")), "attribute_not_exists(entry)", nil, nil)
	debit := upd("balances", acct, "SET amount = if_not_exists(amount, :z) - :d", "", nil, vals(":z", n("0"), ":d", n("5")))
	for _, w := range []any{entryPut, &entryPut} {
		if !slices.Contains(db.WriteTypes(), reflect.TypeOf(w)) {
			t.Errorf("WriteTypes %v does not list %T", db.WriteTypes(), w)
		}
	}
	commits := 0
	commit := func() { commits++ }
	if err := db.ApplyWrites([]any{entryPut, &debit}, commit); err != nil || commits != 1 {
		t.Fatalf("first: %v, %d commits", err, commits)
	}
	if got := db.Item("balances", acct); showItem(got) != `{account:S"a1" amount:N-5}` {
		t.Errorf("balance %s", showItem(got))
	}
	// The entry exists: the second completion is refused whole.
	err := db.ApplyWrites([]any{debit, entryPut}, commit)
	var te *dynamo.TransactionError
	if !errors.As(err, &te) || !errors.Is(err, idemstore.ErrWriteRefused) || len(te.Failures) != 1 || te.Failures[0].Index != 1 || te.Failures[0].Code != "ConditionalCheckFailed" || commits != 1 {
		t.Errorf("refused: %v (%+v), %d commits", err, te, commits)
	}
	if got := db.Item("balances", acct); showItem(got) != `{account:S"a1" amount:N-5}` {
		t.Errorf("a refused completion changed the balance: %s", showItem(got))
	}
	for _, tc := range []struct {
		writes []any
		is     error
	}{
		{[]any{"not a write"}, idemstore.ErrUnsupportedWrite},
		{[]any{(*types.TransactWriteItem)(nil)}, dynamo.ErrTransactionLimit},
		{[]any{entryPut, entryPut}, dynamo.ErrTransactionLimit},
		{[]any{check("balances", acct, "status = :v", nil, vals(":v", s("x")))}, dynamo.ErrTransactionLimit},
		{[]any{put("nope", acct, "", nil, nil)}, dynamotest.ErrNoTable},
		{[]any{upd("balances", acct, "ADD doc.x :v", "", nil, vals(":v", n("1")))}, dynamotest.ErrUnsupported},
	} {
		if err := db.ApplyWrites(tc.writes, commit); !errors.Is(err, tc.is) || errors.Is(err, idemstore.ErrWriteRefused) || errors.Is(err, idemstore.ErrStoreUnavailable) || commits != 1 {
			t.Errorf("%v: %v, want %v and no commit (%d)", tc.writes, err, tc.is, commits)
		}
	}
}
