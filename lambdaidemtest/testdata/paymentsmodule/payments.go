// Package payments is what a lambdaidem user writes for exactly-once
// effects: a handler whose effect is DynamoDB writes committed with the
// record's completion, and its tests (payments_test.go), built on
// lambdaidemtest and its in-memory DynamoDB tables.
package payments

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Order is a message's body.
type Order struct {
	ID       string `json:"order"`
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

// DB is the part of the DynamoDB client the handler calls itself: a
// *dynamodb.Client in production, a *dynamotest.DB in tests.
type DB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Tables names the service's tables: Payments (key "order", sort key
// "payment") and Funds (key "customer", a number "balance").
type Tables struct{ Payments, Funds string }

// Pay records a payment for each order and debits the customer's funds,
// refused when they do not cover it. Both writes commit with the
// record's completion (lambdaidem.AddCompletionWrite): they happen
// together with the "done" mark, or not at all.
func Pay(t Tables) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		payment, debit, err := writes(ctx, t, msg)
		if err != nil {
			return err
		}
		if err := lambdaidem.AddCompletionWrite(ctx, payment); err != nil {
			return err
		}
		return lambdaidem.AddCompletionWrite(ctx, debit)
	}
}

// PayOutsideTransaction is Pay with a mistake: the payment is written at
// once with its own PutItem, and only the debit commits with the
// completion. A crash after the handler, or a lease lost before the
// completion, pays the order again.
func PayOutsideTransaction(db DB, t Tables) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		payment, debit, err := writes(ctx, t, msg)
		if err != nil {
			return err
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: payment.Put.TableName, Item: payment.Put.Item}); err != nil {
			return err
		}
		return lambdaidem.AddCompletionWrite(ctx, debit)
	}
}

// writes builds the payment row (a new payment ID per attempt, as a
// payment provider makes one per call) and the guarded debit.
func writes(ctx context.Context, t Tables, msg events.SQSMessage) (payment, debit types.TransactWriteItem, err error) {
	var o Order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.ID == "" || o.Customer == "" || o.Cents <= 0 {
		return payment, debit, lambdaidem.Poison(errors.New("not an order"))
	}
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	cents := &types.AttributeValueMemberN{Value: strconv.Itoa(o.Cents)}
	payment = types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(t.Payments),
		Item: map[string]types.AttributeValue{
			"order":   &types.AttributeValueMemberS{Value: o.ID},
			"payment": &types.AttributeValueMemberS{Value: "pay-" + strconv.Itoa(lease.Attempt)},
			"cents":   cents,
		},
	}}
	debit = types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(t.Funds),
		Key:                       map[string]types.AttributeValue{"customer": &types.AttributeValueMemberS{Value: o.Customer}},
		UpdateExpression:          aws.String("SET balance = balance - :c"),
		ConditionExpression:       aws.String("balance >= :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": cents},
	}}
	return payment, debit, nil
}
