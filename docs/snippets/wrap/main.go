// Command wrap makes any Lambda function idempotent: the first call with a
// request ID runs it and stores its result, repeats get the stored result.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

type ChargeRequest struct {
	RequestID string `json:"request_id"`
	Amount    int64  `json:"amount"`
}

type Receipt struct {
	ChargeID string `json:"charge_id"`
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	charge := lambdaidem.Wrap(store, func(ctx context.Context, req ChargeRequest) (Receipt, error) {
		return Receipt{ChargeID: "ch_" + req.RequestID}, nil // your payment call
	}, lambdaidem.WithNamespace("charges"), lambdaidem.WithKeyJSONField("request_id"))
	lambda.Start(charge)
}
