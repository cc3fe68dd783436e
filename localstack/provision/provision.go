package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Clients are the two service clients provisioning needs. DynamoDB may
// be nil when the spec has no tables.
type Clients struct {
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
}

// Result names what was created, by logical ID.
type Result struct {
	Tables    map[string]string // logical ID -> table name
	QueueURLs map[string]string // logical ID -> queue URL
	QueueARNs map[string]string // logical ID -> queue ARN
}

// WaitReady polls the services (SQS, and DynamoDB unless its client is
// nil) until they answer or ctx ends. It is only ever used to wait for
// processes that were just started.
func WaitReady(ctx context.Context, c Clients) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var derr error
		if c.DynamoDB != nil {
			_, derr = c.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
		}
		_, serr := c.SQS.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
		if derr == nil && serr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("services not ready: %w", errors.Join(ctx.Err(), derr, serr))
		case <-tick.C:
		}
	}
}

// Provision creates every table and queue of spec. It is idempotent.
func Provision(ctx context.Context, c Clients, spec Spec, log io.Writer) (Result, error) {
	res := Result{Tables: map[string]string{}, QueueURLs: map[string]string{}, QueueARNs: map[string]string{}}
	if len(spec.Tables) > 0 && c.DynamoDB == nil {
		return res, errors.New("the spec has tables but there is no DynamoDB client")
	}
	for _, t := range spec.Tables {
		if err := createTable(ctx, c.DynamoDB, t); err != nil {
			return res, fmt.Errorf("table %s (%s): %w", t.LogicalID, t.Name, err)
		}
		res.Tables[t.LogicalID] = t.Name
		ttl := "off"
		if t.TTLAttribute != "" {
			ttl = t.TTLAttribute
		}
		fmt.Fprintf(log, "table %-18s %s (on-demand, ttl %s, %d index(es))\n", t.LogicalID, t.Name, ttl, len(t.GlobalSecondaryIndexes))
	}
	// Dead-letter queues first: a source queue's redrive policy names its
	// DLQ by ARN.
	ordered := slices.Clone(spec.Queues)
	slices.SortStableFunc(ordered, func(a, b Queue) int {
		return boolInt(a.Redrive != nil) - boolInt(b.Redrive != nil)
	})
	for _, q := range ordered {
		url, arn, err := createQueue(ctx, c.SQS, q, res.QueueARNs)
		if err != nil {
			return res, fmt.Errorf("queue %s (%s): %w", q.LogicalID, q.Name, err)
		}
		res.QueueURLs[q.LogicalID] = url
		res.QueueARNs[q.LogicalID] = arn
		fmt.Fprintf(log, "queue %-18s %s\n", q.LogicalID, url)
	}
	return res, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func createTable(ctx context.Context, db *dynamodb.Client, t Table) error {
	in := tableInput(t)
	_, err := db.CreateTable(ctx, in)
	var inUse *ddbtypes.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		// Already there (a second `provision create`): make sure it is
		// the table we describe, not a stale one with another schema.
		if err := checkTable(ctx, db, t); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}, time.Minute); err != nil {
		return err
	}
	if t.TTLAttribute == "" {
		return nil
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(t.Name)})
	if err != nil {
		return err
	}
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled && aws.ToString(d.AttributeName) == t.TTLAttribute {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(t.Name),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{
			AttributeName: aws.String(t.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	return err
}

func keySchema(hash Key, rng *Key) []ddbtypes.KeySchemaElement {
	ks := []ddbtypes.KeySchemaElement{{AttributeName: aws.String(hash.Name), KeyType: ddbtypes.KeyTypeHash}}
	if rng != nil {
		ks = append(ks, ddbtypes.KeySchemaElement{AttributeName: aws.String(rng.Name), KeyType: ddbtypes.KeyTypeRange})
	}
	return ks
}

func tableInput(t Table) *dynamodb.CreateTableInput {
	seen := map[string]bool{}
	var attrs []ddbtypes.AttributeDefinition
	add := func(k *Key) {
		if k == nil || seen[k.Name] {
			return
		}
		seen[k.Name] = true
		attrs = append(attrs, ddbtypes.AttributeDefinition{AttributeName: aws.String(k.Name), AttributeType: ddbtypes.ScalarAttributeType(k.Type)})
	}
	add(&t.HashKey)
	add(t.RangeKey)
	var gsis []ddbtypes.GlobalSecondaryIndex
	for _, g := range t.GlobalSecondaryIndexes {
		add(&g.HashKey)
		add(g.RangeKey)
		gsis = append(gsis, ddbtypes.GlobalSecondaryIndex{
			IndexName:  aws.String(g.Name),
			KeySchema:  keySchema(g.HashKey, g.RangeKey),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(g.Projection)},
		})
	}
	return &dynamodb.CreateTableInput{
		TableName:              aws.String(t.Name),
		AttributeDefinitions:   attrs,
		KeySchema:              keySchema(t.HashKey, t.RangeKey),
		GlobalSecondaryIndexes: gsis,
		BillingMode:            ddbtypes.BillingModePayPerRequest,
	}
}

// errMismatch reports an existing resource that differs from the description.
var errMismatch = errors.New("existing resource differs from localstack/resources.json; delete it or restart the stack")

// checkTable compares a live table with its description: key schema,
// attribute types and indexes.
func checkTable(ctx context.Context, db *dynamodb.Client, t Table) error {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
	if err != nil {
		return err
	}
	got := describeSchema(out.Table)
	want := describeSchema(&ddbtypes.TableDescription{
		AttributeDefinitions: tableInput(t).AttributeDefinitions,
		KeySchema:            tableInput(t).KeySchema,
		GlobalSecondaryIndexes: func() []ddbtypes.GlobalSecondaryIndexDescription {
			var ds []ddbtypes.GlobalSecondaryIndexDescription
			for _, g := range tableInput(t).GlobalSecondaryIndexes {
				ds = append(ds, ddbtypes.GlobalSecondaryIndexDescription{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
			}
			return ds
		}(),
	})
	if got != want {
		return fmt.Errorf("%w: have %s, want %s", errMismatch, got, want)
	}
	return nil
}

// describeSchema renders the parts of a table that the description fixes,
// in a canonical order, for comparison and error messages.
func describeSchema(d *ddbtypes.TableDescription) string {
	var attrs []string
	for _, a := range d.AttributeDefinitions {
		attrs = append(attrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	slices.Sort(attrs)
	keys := func(ks []ddbtypes.KeySchemaElement) string {
		s := ""
		for _, k := range ks {
			s += aws.ToString(k.AttributeName) + "/" + string(k.KeyType) + " "
		}
		return s
	}
	var idx []string
	for _, g := range d.GlobalSecondaryIndexes {
		p := ""
		if g.Projection != nil {
			p = string(g.Projection.ProjectionType)
		}
		idx = append(idx, aws.ToString(g.IndexName)+"("+keys(g.KeySchema)+p+")")
	}
	slices.Sort(idx)
	return fmt.Sprintf("attrs=%v keys=[%s] gsi=%v", attrs, keys(d.KeySchema), idx)
}

// queueAttributes renders a queue's description as SQS attributes.
func queueAttributes(q Queue, arns map[string]string) (map[string]string, error) {
	attrs := map[string]string{}
	if q.FIFO {
		attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	if q.VisibilityTimeoutSeconds > 0 {
		attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(q.VisibilityTimeoutSeconds)
	}
	if q.MessageRetentionSeconds > 0 {
		attrs[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)] = strconv.Itoa(q.MessageRetentionSeconds)
	}
	if q.Redrive != nil {
		arn, ok := arns[q.Redrive.DeadLetterQueue]
		if !ok {
			return nil, fmt.Errorf("dead-letter queue %s not created", q.Redrive.DeadLetterQueue)
		}
		policy, err := json.Marshal(map[string]any{"deadLetterTargetArn": arn, "maxReceiveCount": q.Redrive.MaxReceiveCount})
		if err != nil {
			return nil, err
		}
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = string(policy)
	}
	return attrs, nil
}

func createQueue(ctx context.Context, c *sqs.Client, q Queue, arns map[string]string) (url, arn string, err error) {
	attrs, err := queueAttributes(q, arns)
	if err != nil {
		return "", "", err
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: attrs})
	var exists *sqstypes.QueueNameExists
	switch {
	case errors.As(err, &exists):
		// The queue is there with other attributes (an older
		// description): bring it in line. FifoQueue cannot change, and
		// the name already fixes it.
		got, gerr := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.Name)})
		if gerr != nil {
			return "", "", errors.Join(err, gerr)
		}
		url = aws.ToString(got.QueueUrl)
		delete(attrs, string(sqstypes.QueueAttributeNameFifoQueue))
		if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
			return "", "", err
		}
	case err != nil:
		return "", "", err
	default:
		url = aws.ToString(out.QueueUrl)
	}
	ga, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", err
	}
	return url, ga.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
