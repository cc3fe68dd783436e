package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// testTuning keeps retries fast in tests. The per-attempt timeout is a
// bound for a hang, long enough for DynamoDB Local on a loaded two-core
// machine: an attempt abandoned at its timeout is retried, and a retry
// changes what a test counts (TestStoreUnavailable, which hangs requests
// on purpose, sets its own).
var testTuning = dynamo.Tuning{AttemptTimeout: 10 * time.Second, MaxBackoff: 20 * time.Millisecond}

// newTable creates a table of its own (TTL off: DynamoDB Local would delete
// the suite's expired records within seconds) and deletes it after the test.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	client := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning))
	table := testenv.Name("lambdaidem-dynamo")
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
	return client, table
}

// bundle is what a test through the fault proxy needs.
type bundle struct {
	table  string
	direct *dynamodb.Client // straight to DynamoDB Local, for setup and checks
	proxy  *faultproxy.Proxy
	store  *dynamo.Store // through the proxy
	ns     string
	t0     time.Time
}

// setup gives a test its own table, a proxy in front of DynamoDB Local and a
// store whose client goes through the proxy.
func setup(t *testing.T, tuning dynamo.Tuning) *bundle {
	t.Helper()
	direct, table := newTable(t)
	p, err := faultproxy.New(testenv.Endpoint(t, testenv.DynamoDBEndpointVar))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	viaProxy := testenv.DynamoDB(t, dynamo.ClientOptions(tuning), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL())
	})
	return &bundle{
		table:  table,
		direct: direct,
		proxy:  p,
		store:  dynamo.New(viaProxy, table),
		ns:     "ns",
		t0:     time.Now().UTC().Truncate(time.Second),
	}
}

func (b *bundle) at(sec int) time.Time { return b.t0.Add(time.Duration(sec) * time.Second) }

func (b *bundle) claimReq(key string, now int) idemstore.ClaimRequest {
	return idemstore.ClaimRequest{
		Namespace:   b.ns,
		Key:         key,
		PayloadHash: "hash",
		MessageID:   "m-" + key,
		Now:         b.at(now),
		LeaseUntil:  b.at(now + 30),
		Grace:       2 * time.Second,
		ExpiresAt:   b.at(now + 3600),
	}
}

func (b *bundle) mustClaim(t *testing.T, req idemstore.ClaimRequest) idemstore.ClaimResult {
	t.Helper()
	res, err := b.store.Claim(t.Context(), req)
	if err != nil {
		t.Fatalf("Claim(%s): %v", req.Key, err)
	}
	if !res.Claimed {
		t.Fatalf("Claim(%s) refused: %+v", req.Key, res.Record)
	}
	return res
}

func (b *bundle) get(t *testing.T, key string, now int) idemstore.Record {
	t.Helper()
	r, err := dynamo.New(b.direct, b.table).Get(t.Context(), idemstore.GetRequest{Namespace: b.ns, Key: key, Now: b.at(now)})
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}
