package httpidem_test

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// An HTTP API route that creates payments: a client retrying with the same
// Idempotency-Key gets the first response back. The route has a JWT
// authorizer, so keys are kept per caller (the token's "sub").
func ExampleHTTP() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), "idempotency")
	createPayment := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"p-1"}`}, nil
	}
	lambda.Start(httpidem.HTTP(store, createPayment,
		httpidem.WithWrapOptions(lambdaidem.WithNamespace("payments"))))
}

// A REST API route where the key is optional: requests without one run
// without idempotency.
func ExampleREST() {
	var store lambdaidem.Store // dynamo.New(...)
	handle := func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	}
	_ = httpidem.REST(store, handle, httpidem.WithKeyOptional(),
		httpidem.WithWrapOptions(lambdaidem.WithNamespace("orders")))
}
