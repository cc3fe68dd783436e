package emf_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// The decorator with metrics on: one EMF line per invocation (plus one
// per duplicate or dead-letter reason) on standard output.
func Example() {
	handle := func(ctx context.Context, m events.SQSMessage) error { return nil }
	store := memstore.New() // dynamo.New(client, table) in production
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithInvocationHook(emf.Hook(emf.WithIdempotencyNamespace("orders")))))
}

// What one invocation emits, from a report built by hand: by default only
// the metrics that are not zero.
func ExampleHook() {
	hook := emf.Hook(
		emf.WithEmitter(emf.NewWriter(os.Stdout)),
		emf.WithClock(func() time.Time { return time.UnixMilli(1700000000000) }),
		emf.WithDimensions(emf.Dimension{Name: "FunctionName", Value: "orders"}),
	)
	hook(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
		{Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true, HandlerDuration: 12 * time.Millisecond, StoreCalls: 2},
		{Outcome: lambdaidem.OutcomeDuplicate, Acked: true, StoreCalls: 1},
		{Outcome: lambdaidem.OutcomeDeadLettered, Acked: true, Reason: lambdaidem.ReasonPoison, HandlerRan: true, HandlerDuration: 3 * time.Millisecond, StoreCalls: 2},
	}})
	// Output:
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"lambdaidem","Dimensions":[["FunctionName"]],"Metrics":[{"Name":"Records","Unit":"Count"},{"Name":"HandlerRuns","Unit":"Count"},{"Name":"Processed","Unit":"Count"},{"Name":"DuplicatesSkipped","Unit":"Count"},{"Name":"DeadLettered","Unit":"Count"},{"Name":"StoreRequests","Unit":"Count"},{"Name":"HandlerLatency","Unit":"Milliseconds"}]}]},"FunctionName":"orders","Records":3,"HandlerRuns":2,"Processed":1,"DuplicatesSkipped":1,"DeadLettered":1,"StoreRequests":5,"HandlerLatency":[12,3]}
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"lambdaidem","Dimensions":[["FunctionName","Reason"]],"Metrics":[{"Name":"DuplicatesSkipped","Unit":"Count"}]}]},"FunctionName":"orders","Reason":"completed","DuplicatesSkipped":1}
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"lambdaidem","Dimensions":[["FunctionName","Reason"]],"Metrics":[{"Name":"DeadLettered","Unit":"Count"}]}]},"FunctionName":"orders","Reason":"poison","DeadLettered":1}
}

// The same invocation with every metric, zeros included.
func ExampleWithAllMetrics() {
	hook := emf.Hook(
		emf.WithEmitter(emf.NewWriter(os.Stdout)),
		emf.WithClock(func() time.Time { return time.UnixMilli(1700000000000) }),
		emf.WithDimensions(emf.Dimension{Name: "FunctionName", Value: "orders"}),
		emf.WithAllMetrics(),
	)
	hook(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
		{Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true, HandlerDuration: 12 * time.Millisecond, StoreCalls: 2},
	}})
	// Output:
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"lambdaidem","Dimensions":[["FunctionName"]],"Metrics":[{"Name":"Records","Unit":"Count"},{"Name":"HandlerRuns","Unit":"Count"},{"Name":"Processed","Unit":"Count"},{"Name":"DuplicatesSkipped","Unit":"Count"},{"Name":"Conflicts","Unit":"Count"},{"Name":"InProgressRejections","Unit":"Count"},{"Name":"LeasesLost","Unit":"Count"},{"Name":"CompletionsUnrecorded","Unit":"Count"},{"Name":"DeadLettered","Unit":"Count"},{"Name":"DeadLetterFailures","Unit":"Count"},{"Name":"StoreErrors","Unit":"Count"},{"Name":"StoreRequests","Unit":"Count"},{"Name":"Failed","Unit":"Count"},{"Name":"Takeovers","Unit":"Count"},{"Name":"HandlerErrors","Unit":"Count"},{"Name":"NotStarted","Unit":"Count"},{"Name":"FIFOGroupSkipped","Unit":"Count"},{"Name":"MissingKeys","Unit":"Count"},{"Name":"VisibilityChangeFailures","Unit":"Count"},{"Name":"HandlerLatency","Unit":"Milliseconds"}]}]},"FunctionName":"orders","Records":1,"HandlerRuns":1,"Processed":1,"DuplicatesSkipped":0,"Conflicts":0,"InProgressRejections":0,"LeasesLost":0,"CompletionsUnrecorded":0,"DeadLettered":0,"DeadLetterFailures":0,"StoreErrors":0,"StoreRequests":2,"Failed":0,"Takeovers":0,"HandlerErrors":0,"NotStarted":0,"FIFOGroupSkipped":0,"MissingKeys":0,"VisibilityChangeFailures":0,"HandlerLatency":12}
}

func ExampleWriter() {
	w := emf.NewWriter(os.Stdout)
	err := w.Emit(context.Background(), emf.MetricSet{
		Namespace:  "shop",
		Dimensions: []emf.Dimension{{Name: "Service", Value: "checkout"}},
		Metrics: []emf.Metric{
			{Name: "Orders", Unit: emf.UnitCount, Values: []float64{3}},
			{Name: "Latency", Unit: emf.UnitMilliseconds, Values: []float64{12.5, 40}},
		},
		Properties: map[string]any{"version": "1.4.0"},
		Timestamp:  time.UnixMilli(1700000000000),
	})
	fmt.Println(err)
	// Output:
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"shop","Dimensions":[["Service"]],"Metrics":[{"Name":"Orders","Unit":"Count"},{"Name":"Latency","Unit":"Milliseconds"}]}]},"Service":"checkout","Orders":3,"Latency":[12.5,40],"version":"1.4.0"}
	// <nil>
}
