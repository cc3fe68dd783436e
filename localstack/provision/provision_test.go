package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// TestProvisionCreatesWhatResourcesJSONSays provisions a private copy of
// the resources twice (the second run must be a no-op) and reads every
// property back from the services.
func TestProvisionCreatesWhatResourcesJSONSays(t *testing.T) {
	t.Parallel()
	spec, err := LoadSpec("../resources.json")
	if err != nil {
		t.Fatal(err)
	}
	spec = spec.WithPrefix(testenv.Name("prov") + "-")
	c := Clients{
		DynamoDB: testenv.DynamoDB(t, dynamo.ChecksumsOnAWSOnly()),
		SQS:      testenv.SQS(t),
	}
	ctx := context.Background()
	res, err := Provision(ctx, c, spec, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range res.Tables {
			_, _ = c.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
		for _, url := range res.QueueURLs {
			_, _ = c.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		}
	})
	again, err := Provision(ctx, c, spec, io.Discard)
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	for id, url := range res.QueueURLs {
		if again.QueueURLs[id] != url {
			t.Errorf("queue %s: second run gave %s, first %s", id, again.QueueURLs[id], url)
		}
	}

	for _, want := range spec.Tables {
		d, err := c.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(want.Name)})
		if err != nil {
			t.Fatal(err)
		}
		if got, exp := describeSchema(d.Table), describeSchema(&ddbtypes.TableDescription{
			AttributeDefinitions: tableInput(want).AttributeDefinitions,
			KeySchema:            tableInput(want).KeySchema,
			GlobalSecondaryIndexes: func() []ddbtypes.GlobalSecondaryIndexDescription {
				var ds []ddbtypes.GlobalSecondaryIndexDescription
				for _, g := range tableInput(want).GlobalSecondaryIndexes {
					ds = append(ds, ddbtypes.GlobalSecondaryIndexDescription{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
				}
				return ds
			}(),
		}); got != exp {
			t.Errorf("table %s: schema %s, want %s", want.LogicalID, got, exp)
		}
		if bm := d.Table.BillingModeSummary; bm == nil || bm.BillingMode != ddbtypes.BillingModePayPerRequest {
			t.Errorf("table %s: billing %+v, want PAY_PER_REQUEST", want.LogicalID, bm)
		}
		ttl, err := c.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(want.Name)})
		if err != nil {
			t.Fatal(err)
		}
		enabled := ttl.TimeToLiveDescription.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled
		if enabled != (want.TTLAttribute != "") || (enabled && aws.ToString(ttl.TimeToLiveDescription.AttributeName) != want.TTLAttribute) {
			t.Errorf("table %s: TTL %+v, want attribute %q", want.LogicalID, ttl.TimeToLiveDescription, want.TTLAttribute)
		}
	}

	for _, want := range spec.Queues {
		got, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(res.QueueURLs[want.LogicalID]),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		a := got.Attributes
		if (a["FifoQueue"] == "true") != want.FIFO {
			t.Errorf("queue %s: FifoQueue=%q, want %v", want.LogicalID, a["FifoQueue"], want.FIFO)
		}
		if want.VisibilityTimeoutSeconds > 0 && a["VisibilityTimeout"] != strconv.Itoa(want.VisibilityTimeoutSeconds) {
			t.Errorf("queue %s: VisibilityTimeout=%q, want %d", want.LogicalID, a["VisibilityTimeout"], want.VisibilityTimeoutSeconds)
		}
		if want.MessageRetentionSeconds > 0 && a["MessageRetentionPeriod"] != strconv.Itoa(want.MessageRetentionSeconds) {
			t.Errorf("queue %s: MessageRetentionPeriod=%q, want %d", want.LogicalID, a["MessageRetentionPeriod"], want.MessageRetentionSeconds)
		}
		if want.Redrive == nil {
			if a["RedrivePolicy"] != "" {
				t.Errorf("queue %s: unexpected RedrivePolicy %s", want.LogicalID, a["RedrivePolicy"])
			}
			continue
		}
		var rp struct {
			DeadLetterTargetArn string
			MaxReceiveCount     json.Number
		}
		if err := json.Unmarshal([]byte(a["RedrivePolicy"]), &rp); err != nil {
			t.Fatalf("queue %s: RedrivePolicy %q: %v", want.LogicalID, a["RedrivePolicy"], err)
		}
		if rp.DeadLetterTargetArn != res.QueueARNs[want.Redrive.DeadLetterQueue] || rp.MaxReceiveCount.String() != strconv.Itoa(want.Redrive.MaxReceiveCount) {
			t.Errorf("queue %s: RedrivePolicy %s, want DLQ %s after %d receives", want.LogicalID, a["RedrivePolicy"], res.QueueARNs[want.Redrive.DeadLetterQueue], want.Redrive.MaxReceiveCount)
		}
	}
}

// TestProvisionRefusesADifferentTable: an existing table with another
// schema is an error, not silently reused.
func TestProvisionRefusesADifferentTable(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t, dynamo.ChecksumsOnAWSOnly())
	ctx := context.Background()
	name := testenv.Name("prov-stale")
	stale := Table{LogicalID: "T", Name: name, HashKey: Key{Name: "id", Type: "S"}}
	if err := createTable(ctx, db, stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	err := createTable(ctx, db, Table{LogicalID: "T", Name: name, HashKey: Key{Name: "pk", Type: "S"}})
	if !errors.Is(err, errMismatch) {
		t.Fatalf("createTable over a table with another key schema: %v, want errMismatch", err)
	}
}
