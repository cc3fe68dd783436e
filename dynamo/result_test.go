package dynamo_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// recordItem reads a record's item as stored, straight from DynamoDB Local.
func (b *bundle) recordItem(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.direct.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(b.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: b.ns + "#" + key}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// storedBytes is the size of an item's names and values (strings, numbers,
// binaries): what DynamoDB bills a refused write's ALL_OLD by, near enough.
func storedBytes(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		}
	}
	return n
}

// TestLargeResultStoredApart pins where results live and what a replay
// costs: a result above the inline limit goes to an item of its own in the
// completion's transaction, the record stays small, and a replay reads the
// result item once.
func TestLargeResultStoredApart(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789"), 30*1024) // 300 KiB

	c := b.mustClaim(t, b.claimReq("big", 0))
	b.proxy.ResetCounts()
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: big, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "complete with a large result", map[string]int{"TransactWriteItems": 1})
	it := b.recordItem(t, "big")
	if _, ok := it["result"]; ok {
		t.Error("the large result is on the record's item")
	}
	if n := storedBytes(it); n > 1024 {
		t.Errorf("the record's item is %d bytes; a refused claim would return all of it", n)
	}

	res, err := b.store.Claim(ctx, b.claimReq("big", 2))
	if err != nil || res.Claimed || !bytes.Equal(res.Record.Result, big) {
		t.Fatalf("replay claim: claimed %v, %d result bytes, %v", res.Claimed, len(res.Record.Result), err)
	}
	wantRequests(t, b.proxy, "refused claim of a large result", map[string]int{"UpdateItem": 1, "GetItem": 1})

	conflict := b.claimReq("big", 3)
	conflict.PayloadHash = "other"
	if res, err := b.store.Claim(ctx, conflict); err != nil || res.Claimed {
		t.Fatalf("conflicting claim: %+v %v", res, err)
	}
	wantRequests(t, b.proxy, "conflicting claim (no result needed)", map[string]int{"UpdateItem": 1})

	if got := b.get(t, "big", 4).Result; !bytes.Equal(got, big) {
		t.Fatalf("Get returned %d result bytes, want %d", len(got), len(big))
	}

	// A small result stays inline: one request each way.
	c = b.mustClaim(t, b.claimReq("small", 0))
	b.proxy.ResetCounts()
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: []byte(`"ok"`), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.store.Claim(ctx, b.claimReq("small", 2)); err != nil || string(res.Record.Result) != `"ok"` {
		t.Fatalf("replay of a small result: %q %v", res.Record.Result, err)
	}
	wantRequests(t, b.proxy, "small result: complete and replay", map[string]int{"UpdateItem": 2})
}

// TestLargeResultLostResponse: the transaction that stores a large result
// applied but its response was lost; the retry recognises its own success.
func TestLargeResultLostResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	big := bytes.Repeat([]byte{9}, 64*1024)
	c := b.mustClaim(t, b.claimReq("k", 0))
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("TransactWriteItems"), Action: faultproxy.DropResponse, Times: 1})
	if err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: big, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatalf("complete after a lost response: %v", err)
	}
	if r := b.get(t, "k", 2); r.Status != idemstore.StatusCompleted || !bytes.Equal(r.Result, big) {
		t.Fatalf("record %s with %d result bytes", r.Status, len(r.Result))
	}
}

// TestWrapLargeResultOnDynamoDB: through Wrap, a 300 KiB result is stored
// and replayed without a second run; one beyond what can be stored
// completes the key and a repeat gets ErrResultNotStored.
func TestWrapLargeResultOnDynamoDB(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	runs := 0
	f := lambdaidem.Wrap(b.store, func(_ context.Context, n int) (string, error) {
		runs++
		return string(bytes.Repeat([]byte("z"), n)), nil
	}, lambdaidem.WithNamespace(b.ns), quiet, lambdaidem.WithMaxResultBytes(dynamo.MaxResultBytes))
	for _, n := range []int{300 * 1024, 500 * 1024} {
		first, err := f(t.Context(), n)
		if err != nil || len(first) != n {
			t.Fatalf("%d bytes, first call: %d bytes, %v", n, len(first), err)
		}
		again, err := f(t.Context(), n)
		switch {
		case n < dynamo.MaxResultBytes:
			if err != nil || again != first {
				t.Fatalf("%d bytes, replay: %d bytes, %v", n, len(again), err)
			}
		case !errors.Is(err, lambdaidem.ErrResultNotStored):
			t.Fatalf("%d bytes, repeat: %v, want ErrResultNotStored", n, err)
		}
	}
	if runs != 2 {
		t.Fatalf("ran %d times, want once per input", runs)
	}
}
