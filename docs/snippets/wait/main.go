// Command wait answers a retried payment request with the first request's
// response: a retry that finds the first still running waits for it
// instead of getting 409.
package main

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func createPayment(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"pay_1"}`}, nil // your payment call
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(httpidem.HTTP(store, createPayment,
		httpidem.WithWrapOptions(
			lambdaidem.WithNamespace("payments"),
			// Up to 10 s: well within API Gateway's 29 s integration timeout.
			lambdaidem.WithWaitForCompletion(10*time.Second))))
}
