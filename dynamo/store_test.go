package dynamo_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// TestInvalidKeys: what cannot be stored is refused with a named error
// before any request.
func TestInvalidKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	long := strings.Repeat("k", 2048)
	for _, tc := range []struct {
		name   string
		mutate func(*idemstore.ClaimRequest)
		also   error
	}{
		{"empty namespace", func(r *idemstore.ClaimRequest) { r.Namespace = "" }, nil},
		{"empty key", func(r *idemstore.ClaimRequest) { r.Key = "" }, idemstore.ErrMissingKey},
		{"namespace with #", func(r *idemstore.ClaimRequest) { r.Namespace = "a#b" }, nil},
		{"key over 2048 bytes with the namespace", func(r *idemstore.ClaimRequest) { r.Key = long }, nil},
		{"huge payload hash", func(r *idemstore.ClaimRequest) { r.PayloadHash = long }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := b.claimReq("k", 0)
			tc.mutate(&req)
			_, err := b.store.Claim(t.Context(), req)
			if !errors.Is(err, dynamo.ErrInvalidKey) || errors.Is(err, idemstore.ErrStoreUnavailable) {
				t.Fatalf("Claim = %v, want ErrInvalidKey", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("Claim = %v, want also %v", err, tc.also)
			}
		})
	}
	if n := b.proxy.Total(); n != 0 {
		t.Errorf("%d requests sent for invalid input, want 0", n)
	}
	// A key of exactly the limit with its namespace is fine, and "#" in
	// the key survives the round trip.
	req := b.claimReq(strings.Repeat("k", 2048-len(b.ns)-1-3)+"#/#", 0)
	req.MessageID = "m"
	c := b.mustClaim(t, req)
	if c.Record.Key != req.Key || c.Record.Namespace != b.ns {
		t.Errorf("round trip: namespace %q key %q", c.Record.Namespace, c.Record.Key)
	}
}

// TestResultTooLarge: a result that cannot fit is refused before sending,
// and the store leaves the record as it was (still leased to the caller,
// who decides what to record instead).
func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	c := b.mustClaim(t, b.claimReq("big", 0))
	before := b.get(t, "big", 1)
	b.proxy.ResetCounts()
	err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: make([]byte, 400*1024), ExpiresAt: b.at(3600)})
	if !errors.Is(err, idemstore.ErrResultTooLarge) {
		t.Fatalf("Complete = %v, want ErrResultTooLarge", err)
	}
	if n := b.proxy.Total(); n != 0 {
		t.Errorf("%d requests sent, want 0", n)
	}
	if d := storetest.RecordDiff(before, b.get(t, "big", 1)); d != "" {
		t.Errorf("record changed (-before +after):\n%s", d)
	}
	// The lease is intact: the caller can still record the failure.
	if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: c.Lease, Now: b.at(2), Error: err.Error(), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatalf("Fail after ErrResultTooLarge: %v", err)
	}
	// A result just under the limit of the decorator (350 KB) fits.
	c = b.mustClaim(t, b.claimReq("fits", 0))
	result := bytes.Repeat([]byte{7}, idemstore.MinResultBytes)
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: result, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatalf("Complete with %d bytes: %v", len(result), err)
	}
	if got := b.get(t, "fits", 2).Result; !bytes.Equal(got, result) {
		t.Errorf("result of %d bytes came back as %d bytes", len(result), len(got))
	}
}

// TestItemSizeValidationIsResultTooLarge feeds DynamoDB Local's own
// item-size refusals (PutItem and UpdateItem) to the classification.
func TestItemSizeValidationIsResultTooLarge(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	big := &types.AttributeValueMemberB{Value: make([]byte, 410*1024)}
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x#y"}, "result": big},
	})
	if err == nil {
		t.Fatal("PutItem of 410 KB succeeded")
	}
	if got := dynamo.Classify("put", "x#y", err); !errors.Is(got, idemstore.ErrResultTooLarge) {
		t.Errorf("PutItem's %v classified as %v", err, got)
	}
	_, err = client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x#y"}},
		UpdateExpression:          aws.String("SET #r = :r"),
		ExpressionAttributeNames:  map[string]string{"#r": "result"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": big},
	})
	if err == nil {
		t.Fatal("UpdateItem of 410 KB succeeded")
	}
	if got := dynamo.Classify("update", "x#y", err); !errors.Is(got, idemstore.ErrResultTooLarge) {
		t.Errorf("UpdateItem's %v classified as %v", err, got)
	}
	// Other validation errors are neither.
	_, err = client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"nope": &types.AttributeValueMemberS{Value: "x"}},
	})
	got := dynamo.Classify("get", "x", err)
	if errors.Is(got, idemstore.ErrResultTooLarge) || errors.Is(got, idemstore.ErrStoreUnavailable) {
		t.Errorf("a bad key schema's %v classified as %v", err, got)
	}
}

// TestLastErrorTruncated: long error texts are cut to the limit on a
// character boundary.
func TestLastErrorTruncated(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	s := dynamo.New(client, table, dynamo.WithLastErrorBytes(100))
	now := time.Now().Truncate(time.Second)
	c, err := s.Claim(t.Context(), idemstore.ClaimRequest{Namespace: "n", Key: "k", PayloadHash: "h", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !c.Claimed {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	msg := strings.Repeat("é", 200)
	if err := s.Fail(t.Context(), idemstore.FailRequest{Lease: c.Lease, Now: now, Error: msg, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(t.Context(), idemstore.GetRequest{Namespace: "n", Key: "k", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.LastError) > 100 || !strings.HasPrefix(msg, strings.TrimSuffix(r.LastError, "…[truncated]")) || !strings.HasSuffix(r.LastError, "[truncated]") {
		t.Errorf("LastError = %q (%d bytes)", r.LastError, len(r.LastError))
	}
}

// TestZeroExpiryNeverExpires: a record without ExpiresAt is kept and
// claimable forever, as the Record contract says.
func TestZeroExpiryNeverExpires(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	s := dynamo.New(client, table)
	now := time.Now().Truncate(time.Second)
	c, err := s.Claim(t.Context(), idemstore.ClaimRequest{Namespace: "n", Key: "k", PayloadHash: "h", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || !c.Claimed || !c.Record.ExpiresAt.IsZero() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if err := s.Fail(t.Context(), idemstore.FailRequest{Lease: c.Lease, Now: now}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(100 * 365 * 24 * time.Hour)
	c, err = s.Claim(t.Context(), idemstore.ClaimRequest{Namespace: "n", Key: "k", PayloadHash: "h", Now: later, LeaseUntil: later.Add(time.Minute)})
	if err != nil || !c.Claimed || c.Previous != idemstore.StatusFailed {
		t.Fatalf("Claim a century later = %+v, %v", c, err)
	}
}
