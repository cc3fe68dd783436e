package payments

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

var tables = Tables{Payments: "payments", Funds: "funds"}

// newDB is the service's tables in memory, with the customers' funds.
func newDB(funds map[string]int) *dynamotest.DB {
	db := dynamotest.New(
		dynamotest.Table{Name: tables.Payments, HashKey: "order", RangeKey: "payment"},
		dynamotest.Table{Name: tables.Funds, HashKey: "customer"},
	)
	for customer, cents := range funds {
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.Funds), Item: map[string]types.AttributeValue{
			"customer": &types.AttributeValueMemberS{Value: customer},
			"balance":  &types.AttributeValueMemberN{Value: strconv.Itoa(cents)},
		}})
		if err != nil {
			panic(err) // a put without a condition on a declared table
		}
	}
	return db
}

// paidOnce is the invariant: no order paid twice, and the funds went down
// by exactly what was paid.
func paidOnce(db *dynamotest.DB, funds map[string]int) func() error {
	return func() error {
		count, paid, left, total := map[string]int{}, 0, 0, 0
		for _, p := range db.Items(tables.Payments) {
			order := p["order"].(*types.AttributeValueMemberS).Value
			if count[order]++; count[order] > 1 {
				return fmt.Errorf("order %s paid %d times: duplicate effect", order, count[order])
			}
			cents, _ := strconv.Atoi(p["cents"].(*types.AttributeValueMemberN).Value)
			paid += cents
		}
		for _, f := range db.Items(tables.Funds) {
			cents, _ := strconv.Atoi(f["balance"].(*types.AttributeValueMemberN).Value)
			left += cents
		}
		for _, cents := range funds {
			total += cents
		}
		if total-left != paid {
			return fmt.Errorf("funds went down by %d, payments add up to %d", total-left, paid)
		}
		return nil
	}
}

var (
	// As deployed: the writes are declared, so a store that cannot commit
	// them is refused when the kit is made.
	options = []lambdaidem.Option{lambdaidem.WithKeyJSONField("order"), lambdaidem.WithMaxAttempts(3),
		lambdaidem.WithCompletionWrites[types.TransactWriteItem]()}
	funds  = map[string]int{"alice": 1000, "bob": 500}
	orders = []string{
		`{"order":"o-1","customer":"alice","cents":300}`,
		`{"order":"o-2","customer":"bob","cents":400}`,
		`{"order":"o-3","customer":"alice","cents":700}`,
		`{"order":"o-4","customer":"bob","cents":200}`, // bob cannot pay both o-2 and o-4
	}
)

// explore runs a handler over the orders on the in-memory store, whose
// completions commit the handler's writes to the DB.
func explore(handler func(db *dynamotest.DB) lambdaidem.MessageHandler) lambdaidemtest.Exploration {
	var db *dynamotest.DB
	return lambdaidemtest.Exploration{Messages: orders, Options: options, Scenarios: 2000,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			db = newDB(funds)
			return handler(db), paidOnce(db, funds)
		},
		Store: func() lambdaidem.Store { return memstore.New(memstore.WithCompletionWrites(db)) },
		// Whichever of bob's orders comes second is refused until it is
		// dead-lettered.
		Expect: func(k *lambdaidemtest.Kit) {
			k.ExpectDeadLetter("o-2", lambdaidem.ReasonMaxAttempts)
			k.ExpectDeadLetter("o-4", lambdaidem.ReasonMaxAttempts)
		},
	}
}

func TestTransactionalPaysExactlyOnce(t *testing.T) {
	lambdaidemtest.Explore(t, explore(func(*dynamotest.DB) lambdaidem.MessageHandler { return Pay(tables) }))
}

func TestPaymentOutsideTheTransactionIsCaught(t *testing.T) {
	f := explore(func(db *dynamotest.DB) lambdaidem.MessageHandler { return PayOutsideTransaction(db, tables) }).Search()
	if f == nil {
		t.Fatal("the payment written outside the transaction went unnoticed")
	}
	t.Logf("caught: seed %d: %s", f.Seed, f.Problems[0])
}

func TestEachFailureModePaysOnce(t *testing.T) {
	const body = `{"order":"o-1","customer":"alice","cents":300}`
	for name, scenario := range map[string]func(*lambdaidemtest.Kit){
		"crash after the handler":          func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(body) },
		"lease lost before the completion": func(k *lambdaidemtest.Kit) { k.LeaseLostBeforeCompletion(body) },
		"takeover from a paused holder":    func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(body) },
		"delivered twice":                  func(k *lambdaidemtest.Kit) { k.DeliverTwice(body) },
	} {
		t.Run(name, func(t *testing.T) {
			db := newDB(funds)
			k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), Pay(tables), options...)
			scenario(k)
			if err := paidOnce(db, funds)(); err != nil || len(db.Items(tables.Payments)) != 1 {
				t.Errorf("%v: %d payments in %d runs", err, len(db.Items(tables.Payments)), k.Runs("o-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestInsufficientFundsAreDeadLettered(t *testing.T) {
	db := newDB(funds)
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), Pay(tables), options...)
	k.ExpectDeadLetter("o-9", lambdaidem.ReasonMaxAttempts)
	k.Poison(`{"order":"o-9","customer":"bob","cents":501}`)
	if err := k.Check(); err != nil {
		t.Error(err)
	}
	if n := len(db.Items(tables.Payments)); n != 0 || k.Status("o-9") != lambdaidem.StatusDeadLettered {
		t.Errorf("%d payments, o-9 is %s", n, k.Status("o-9"))
	}
}
