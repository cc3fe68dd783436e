package lambdaidemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// The tables of a payment service: one row per payment (a fresh payment
// ID per handler run, as a payment provider makes one per call), and the
// customer's funds.
var paymentTables = []dynamotest.Table{
	{Name: "payments", HashKey: "order", RangeKey: "payment"},
	{Name: "funds", HashKey: "customer"},
}

type order struct {
	ID       string `json:"order"`
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

// pay records the payment and debits the customer's funds (refused when
// they do not cover it). transactional commits both with the completion;
// otherwise the payment is written at once with its own PutItem, the
// mistake the kit must catch.
func pay(db *dynamotest.DB, transactional bool) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
			return lambdaidem.Poison(err)
		}
		lease, _ := lambdaidem.LeaseFromContext(ctx)
		payment := &types.Put{
			TableName: aws.String("payments"),
			Item: map[string]types.AttributeValue{
				"order":   &types.AttributeValueMemberS{Value: o.ID},
				"payment": &types.AttributeValueMemberS{Value: "pay-" + strconv.Itoa(lease.Attempt)},
				"cents":   &types.AttributeValueMemberN{Value: strconv.Itoa(o.Cents)},
			},
		}
		debit := types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String("funds"),
			Key:                       map[string]types.AttributeValue{"customer": &types.AttributeValueMemberS{Value: o.Customer}},
			UpdateExpression:          aws.String("SET balance = balance - :c"),
			ConditionExpression:       aws.String("balance >= :c"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: strconv.Itoa(o.Cents)}},
		}}
		if !transactional {
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: payment.TableName, Item: payment.Item}); err != nil {
				return err
			}
		} else if err := lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: payment}); err != nil {
			return err
		}
		return lambdaidem.AddCompletionWrite(ctx, debit)
	}
}

// newPayments is a DB whose customers have the given funds.
func newFunds(t testing.TB, funds map[string]int) *dynamotest.DB {
	db := dynamotest.New(paymentTables...)
	for c, cents := range funds {
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("funds"), Item: map[string]types.AttributeValue{
			"customer": &types.AttributeValueMemberS{Value: c}, "balance": &types.AttributeValueMemberN{Value: strconv.Itoa(cents)},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// paidOnce is the exactly-once invariant: every order has at most one
// payment, and each customer's funds went down by exactly what was paid.
func paidOnce(db *dynamotest.DB, funds map[string]int, bodies []string) func() error {
	return func() error {
		byOrder := map[string]int{}
		paid := 0
		for _, p := range db.Items("payments") {
			o := p["order"].(*types.AttributeValueMemberS).Value
			byOrder[o]++
			c, _ := strconv.Atoi(p["cents"].(*types.AttributeValueMemberN).Value)
			paid += c
			if byOrder[o] > 1 {
				return fmt.Errorf("order %s paid %d times: duplicate effect", o, byOrder[o])
			}
		}
		left := 0
		for _, f := range db.Items("funds") {
			b, _ := strconv.Atoi(f["balance"].(*types.AttributeValueMemberN).Value)
			left += b
		}
		total := 0
		for _, c := range funds {
			total += c
		}
		if total-left != paid {
			return fmt.Errorf("funds went down by %d, payments add up to %d", total-left, paid)
		}
		return nil
	}
}

func paymentCount(db *dynamotest.DB) int { return len(db.Items("payments")) }

const (
	o1 = `{"order":"o-1","customer":"alice","cents":300}`
	o2 = `{"order":"o-2","customer":"alice","cents":900}`
)

var byOrderKey = lambdaidem.WithKeyJSONField("order")

// The kit's default store commits no completion writes: the handler the
// README recommends for exactly-once cannot run there, and Check and
// Explore say so instead of passing. (Declared with
// lambdaidem.WithCompletionWrites, the kit refuses it when built:
// TestKitRefusesWritesItsStoreCannotCommit.) AddCompletionWrite refuses
// the write in the handler, which fails. Poison does not declare a dead
// letter the kit itself caused.
func TestTransactionalHandlerOnDefaultStoreIsReported(t *testing.T) {
	db := newFunds(t, map[string]int{"alice": 1000})
	k := lambdaidemtest.New(pay(db, true), byOrderKey)
	k.Poison(o1)
	err := k.Check()
	if err == nil {
		t.Fatalf("Check passed a handler whose completions were all refused: outcomes %v", k.Outcomes("o-1"))
	}
	for _, want := range []string{"undeclared dead letter", "max_attempts", "undeclared", "the handler failed", "unsupported completion write", "memstore.WithCompletionWrites"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's report does not say %q:\n%v", want, err)
		}
	}
	f := lambdaidemtest.Exploration{Messages: []string{o1}, Options: []lambdaidem.Option{byOrderKey}, Scenarios: 20,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			db := newFunds(t, map[string]int{"alice": 1000})
			return pay(db, true), func() error { return nil }
		}}.Search()
	if f == nil || !strings.Contains(f.Error(), "unsupported completion write") {
		t.Errorf("the explorer passed a handler it cannot run: %v", f)
	}
}

// On the in-memory store with a dynamotest.DB, a transactional handler's
// effect commits with its completion: exactly once through a crash after
// the handler, a lease lost before the completion, a takeover from a
// paused holder; and a refused condition refuses the completion whole.
func TestTransactionalHandlerExactlyOnce(t *testing.T) {
	funds := map[string]int{"alice": 1000}
	for _, tc := range []struct {
		name string
		run  func(*lambdaidemtest.Kit)
		runs int
	}{
		{"crash after the effect", func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(o1) }, 2},
		{"lease lost before the completion", func(k *lambdaidemtest.Kit) { k.LeaseLostBeforeCompletion(o1) }, 2},
		{"takeover from a paused holder", func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(o1) }, 2},
		{"delivered twice", func(k *lambdaidemtest.Kit) { k.DeliverTwice(o1) }, 1},
		{"producer duplicate", func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(o1) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFunds(t, funds)
			k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, true), byOrderKey)
			k.SetTrace(true)
			tc.run(k)
			if err := k.Check(); err != nil {
				t.Fatal(err)
			}
			if err := paidOnce(db, funds, nil)(); err != nil || paymentCount(db) != 1 || k.Runs("o-1") != tc.runs || k.Status("o-1") != lambdaidem.StatusCompleted {
				t.Errorf("%v; %d payments in %d runs (want %d), o-1 %s\n%s", err, paymentCount(db), k.Runs("o-1"), tc.runs, k.Status("o-1"), k.Trace())
			}
		})
	}
	t.Run("the same scenarios double a plain effect", func(t *testing.T) {
		for _, scenario := range []func(*lambdaidemtest.Kit){
			func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(o1) },
			func(k *lambdaidemtest.Kit) { k.LeaseLostBeforeCompletion(o1) },
		} {
			db := newFunds(t, funds)
			k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, false), byOrderKey)
			scenario(k)
			if err := paidOnce(db, funds, nil)(); err == nil || !strings.Contains(err.Error(), "duplicate effect") {
				t.Errorf("a payment written outside the transaction: %v, %d payments", err, paymentCount(db))
			}
		}
	})
	t.Run("a refused condition", func(t *testing.T) {
		db := newFunds(t, funds)
		k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, true), byOrderKey, lambdaidem.WithMaxAttempts(2))
		k.Send(o1)
		k.Send(o2) // 900 more than the 700 left
		k.Run()
		err := k.Check()
		if err == nil || !strings.Contains(err.Error(), "completion was refused") || !strings.Contains(err.Error(), "ConditionalCheckFailed") {
			t.Fatalf("an undeclared refusal passed Check: %v", err)
		}
		k.ExpectDeadLetter("o-2", lambdaidem.ReasonMaxAttempts)
		if err := k.Check(); err != nil {
			t.Error(err)
		}
		if err := paidOnce(db, funds, nil)(); err != nil || paymentCount(db) != 1 || k.Status("o-2") != lambdaidem.StatusDeadLettered {
			t.Errorf("%v: %d payments, o-2 %s", err, paymentCount(db), k.Status("o-2"))
		}
		var refused bool
		for _, d := range k.DeadLetters() {
			refused = refused || strings.Contains(d.Error, "ConditionalCheckFailed")
		}
		if !refused {
			t.Errorf("the dead letter does not carry the refusal: %+v", k.DeadLetters())
		}
	})
}

// The explorer proves the transactional handler exactly once under every
// failure it draws, and catches the payment written outside the
// transaction.
func TestExplorerTransactional(t *testing.T) {
	funds := map[string]int{"alice": 2000, "bob": 500}
	bodies := []string{o1, `{"order":"o-3","customer":"bob","cents":500}`, o2, `{"order":"o-4","customer":"bob","cents":1}`}
	explore := func(transactional bool) lambdaidemtest.Exploration {
		var db *dynamotest.DB
		return lambdaidemtest.Exploration{
			Messages: bodies, Options: []lambdaidem.Option{byOrderKey}, Scenarios: 300,
			Setup: func() (lambdaidem.MessageHandler, func() error) {
				db = newFunds(t, funds)
				return pay(db, transactional), paidOnce(db, funds, bodies)
			},
			Store: func() lambdaidem.Store { return memstore.New(memstore.WithCompletionWrites(db)) },
			// bob's funds cover o-3 or o-4, not both: whichever comes
			// second is refused until it is dead-lettered.
			Expect: func(k *lambdaidemtest.Kit) {
				k.ExpectDeadLetter("o-3", lambdaidem.ReasonMaxAttempts)
				k.ExpectDeadLetter("o-4", lambdaidem.ReasonMaxAttempts)
			},
		}
	}
	lambdaidemtest.Explore(t, explore(true))
	f := explore(false).Search()
	if f == nil || !strings.Contains(f.Error(), "duplicate effect") {
		t.Fatalf("the payment written outside the transaction was not caught: %v", f)
	}
	t.Logf("caught: seed %d: %s", f.Seed, f.Problems[0])
}
