package dynamo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// proxiedClient is a tuned client whose requests go through a fault proxy
// in front of DynamoDB Local, and a direct one for cleanup.
func proxiedClient(t *testing.T) (*faultproxy.Proxy, *dynamodb.Client, *dynamodb.Client) {
	t.Helper()
	direct := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning))
	p, err := faultproxy.New(testenv.Endpoint(t, testenv.DynamoDBEndpointVar))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	via := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL())
	})
	return p, direct, via
}

func dropTable(t *testing.T, client *dynamodb.Client, table string) {
	t.Cleanup(func() {
		if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
}

// A create whose answer is lost is retried by the SDK, and the retry is
// refused because the first attempt made the table: CreateTable succeeds.
// Running it again on the finished table (TTL already on) succeeds too.
func TestCreateTableAcceptsItsOwnRetriedCreate(t *testing.T) {
	t.Parallel()
	p, direct, via := proxiedClient(t)
	table := testenv.Name("lambdaidem-create")
	dropTable(t, direct, table)
	p.Inject(faultproxy.Fault{Match: faultproxy.Op("CreateTable"), Action: faultproxy.DropResponse, Times: 1})
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	opts := dynamo.TableOptions{PollInterval: 20 * time.Millisecond}
	if err := dynamo.CreateTable(ctx, via, table, opts); err != nil {
		t.Fatalf("CreateTable with its first answer lost: %v", err)
	}
	if n := p.Count("CreateTable"); n != 2 {
		t.Fatalf("the proxy saw %d CreateTable requests, want 2 (the lost one and the SDK's retry)", n)
	}
	if err := dynamo.CreateTable(ctx, via, table, opts); err != nil {
		t.Fatalf("CreateTable on the existing table: %v", err)
	}
	ttl, err := direct.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires_at" || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL after the retried create: %+v, want enabled on expires_at", d)
	}
}

// A table of the same name and another shape is refused by name and left
// as it was.
func TestCreateTableRefusesAnotherShape(t *testing.T) {
	t.Parallel()
	_, direct, via := proxiedClient(t)
	table := testenv.Name("lambdaidem-shape")
	dropTable(t, direct, table)
	_, err := direct.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = dynamo.CreateTable(t.Context(), via, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond})
	if !errors.Is(err, dynamo.ErrTableShape) {
		t.Fatalf("CreateTable over a numeric-key table: %v, want ErrTableShape", err)
	}
	t.Log(err)
	out, err := direct.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Table.GlobalSecondaryIndexes) != 0 {
		t.Errorf("the refused table gained indexes: %+v", out.Table.GlobalSecondaryIndexes)
	}
}
