package dynamotest_test

import (
	"bufio"
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
)

// Every word of reserved.txt is one DynamoDB Local refuses as an
// attribute name in an expression, and so does the interpreter; a word
// outside the list passes both.
func TestReservedWords(t *testing.T) {
	f, err := os.Open("reserved.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var words []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		words = append(words, sc.Text())
	}
	if len(words) < 500 {
		t.Fatalf("reserved.txt holds %d words", len(words))
	}
	local, mem := localTables(t), memTables()
	ctx := context.Background()
	try := func(tg target, word string) error {
		_, err := tg.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tg.tables["balances"]), Key: acct, ConditionExpression: aws.String("attribute_not_exists(" + word + ")")}},
		}})
		return err
	}
	for _, w := range append(words, "balance", "amount", "entry_id") {
		reservedWord := w != "balance" && w != "amount" && w != "entry_id"
		for _, tg := range []target{local, mem} {
			err := try(tg, w)
			if got := dynamotest.IsValidation(err); got != reservedWord {
				t.Errorf("%q on %T: %v", w, tg.c, err)
			}
		}
	}
}
