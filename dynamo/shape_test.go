package dynamo_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestWriteShapes: a completion write that DynamoDB (or the SDK, before
// sending) refuses for its form, whatever the tables hold, is refused by
// the store when the handler adds it and again before anything is sent,
// with ErrTransactionLimit. Each such write is first sent on its own to
// DynamoDB Local, which must refuse it too, so the store refuses nothing
// DynamoDB would take; the writes at the edge of each limit are taken by
// both. Before, the SDK's refusals (a missing UpdateExpression or
// ConditionExpression) and DynamoDB Local's answer to a nil value (a 500)
// made the completion fail as a store unavailable, retried on every
// delivery.
func TestWriteShapes(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	fx := effectsTable(t, b.direct)
	S := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
	N := func(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
	key := func(id string) map[string]types.AttributeValue { return map[string]types.AttributeValue{"id": S(id)} }
	put := func(id, name string, v types.AttributeValue) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(fx), Item: map[string]types.AttributeValue{"id": S(id), name: v}}}
	}
	update := func(id, expr string, names map[string]string, values map[string]types.AttributeValue) types.TransactWriteItem {
		var e *string
		if expr != "-" {
			e = aws.String(expr)
		}
		return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(fx), Key: key(id), UpdateExpression: e,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
	}
	del := func(k map[string]types.AttributeValue) types.TransactWriteItem {
		return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(fx), Key: k}}
	}
	nest := func(levels int) types.AttributeValue { // levels of nesting, the leaf the last
		var v types.AttributeValue = S("leaf")
		for range levels - 1 {
			v = &types.AttributeValueMemberL{Value: []types.AttributeValue{v}}
		}
		return v
	}
	big := strings.Repeat("x", 450*1024)
	one := map[string]types.AttributeValue{":v": S("x")}

	refused := []struct {
		name string
		w    types.TransactWriteItem
		// localTakes: DynamoDB Local takes it, though DynamoDB refuses it.
		localTakes bool
	}{
		{name: "an update without an UpdateExpression", w: update("a", "-", nil, nil)},
		{name: "an empty UpdateExpression", w: update("a", " ", nil, nil)},
		{name: "a condition check without a ConditionExpression", w: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(fx), Key: key("a")}}},
		{name: "a put without an item", w: types.TransactWriteItem{Put: &types.Put{TableName: aws.String(fx), Item: map[string]types.AttributeValue{}}}},
		{name: "a table name DynamoDB never takes", w: types.TransactWriteItem{Put: &types.Put{TableName: aws.String("a b"), Item: key("a")}}},
		{name: "a nil value", w: put("a", "v", nil)},
		{name: "a NULL that is not true", w: put("a", "v", &types.AttributeValueMemberNULL{})},
		{name: "an empty string set", w: put("a", "v", &types.AttributeValueMemberSS{})},
		{name: "a string set holding a member twice", w: put("a", "v", &types.AttributeValueMemberSS{Value: []string{"x", "x"}})},
		{name: "a number set holding one number twice", w: put("a", "v", &types.AttributeValueMemberNS{Value: []string{"1", "1.0"}})},
		{name: "an empty binary set", w: put("a", "v", &types.AttributeValueMemberBS{})},
		{name: "a number that is none", w: put("a", "v", N("12abc"))},
		{name: "an empty number", w: put("a", "v", N(""))},
		{name: "a number with a space", w: put("a", "v", N(" 1"))},
		{name: "39 significant digits", w: put("a", "v", N(strings.Repeat("1", 39)))},
		{name: "a number of 1E+126", w: put("a", "v", N("1E126"))},
		{name: "a number of 1E-131", w: put("a", "v", N("0.1E-130"))},
		{name: "33 levels of nesting", w: put("a", "v", nest(33))},
		{name: "an empty attribute name", w: put("a", "", S("x"))},
		{name: "a map entry with an empty name", w: put("a", "m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"": S("x")}})},
		{name: "a key that is a boolean", w: del(map[string]types.AttributeValue{"id": &types.AttributeValueMemberBOOL{Value: true}})},
		{name: "an empty key", w: del(key(""))},
		{name: "a key of 2049 bytes", w: del(key(strings.Repeat("k", 2049)))},
		{name: "a key of three attributes", w: del(map[string]types.AttributeValue{"id": S("a"), "b": S("b"), "c": S("c")})},
		{name: "a key of no attribute", w: del(map[string]types.AttributeValue{})},
		{name: "a value placeholder in no expression", w: update("a", "SET n = :v", nil, map[string]types.AttributeValue{":v": S("x"), ":w": S("y")})},
		{name: "a name placeholder in no expression", w: update("a", "SET n = :v", map[string]string{"#x": "x"}, one)},
		{name: "a value placeholder not defined", w: update("a", "SET n = :v", nil, nil)},
		{name: "a name placeholder not defined", w: update("a", "SET #n = :v", nil, one)},
		{name: "an empty map of values", w: update("a", "REMOVE n", nil, map[string]types.AttributeValue{})},
		{name: "an empty map of names", w: update("a", "REMOVE n", map[string]string{}, nil)},
		{name: "a name placeholder without '#'", w: update("a", "REMOVE n", map[string]string{"n": "n"}, nil)},
		{name: "a name placeholder with a '-'", w: update("a", "REMOVE #a-b", map[string]string{"#a-b": "n"}, nil)},
		{name: "a placeholder of an empty name", w: update("a", "REMOVE #n", map[string]string{"#n": ""}, nil)},
		{name: "values on a put without a condition", w: types.TransactWriteItem{Put: &types.Put{TableName: aws.String(fx), Item: key("a"), ExpressionAttributeValues: one}}},
		{name: "placeholders over 2 MB", w: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(fx), Key: key("a"),
			ConditionExpression:       aws.String("n IN (:a, :b, :c, :d, :e)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": S(big + "a"), ":b": S(big + "b"), ":c": S(big + "c"), ":d": S(big + "d"), ":e": S(big + "e")}}}},
		{name: "an unknown ReturnValuesOnConditionCheckFailure", localTakes: true,
			w: types.TransactWriteItem{Put: &types.Put{TableName: aws.String(fx), Item: key("a"), ReturnValuesOnConditionCheckFailure: "EVERYTHING"}}},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, raw := b.direct.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{tc.w}})
			switch {
			case raw == nil && !tc.localTakes:
				t.Fatalf("DynamoDB Local took the write: the store must not refuse it")
			case raw != nil && tc.localTakes:
				t.Logf("DynamoDB Local refuses it now: %v", raw)
			}
			err := b.store.Capabilities().CheckWrite(idemstore.Lease{Namespace: b.ns, Key: "k"}, []any{tc.w})
			if !errors.Is(err, dynamo.ErrTransactionLimit) {
				t.Errorf("CheckWrite = %v, want ErrTransactionLimit", err)
			}
			c := b.mustClaim(t, b.claimReq(fmt.Sprint("refused-", i), 0))
			err = b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600), Writes: []any{tc.w}})
			if !errors.Is(err, dynamo.ErrTransactionLimit) || errors.Is(err, idemstore.ErrStoreUnavailable) {
				t.Errorf("Complete = %v, want ErrTransactionLimit", err)
			}
			_, err = b.store.Commit(t.Context(), idemstore.CommitRequest{Namespace: b.ns, Key: fmt.Sprint("commit-", i), PayloadHash: "h",
				Token: fmt.Sprint("tok-", i), Now: b.at(1), Status: idemstore.StatusCompleted, ExpiresAt: b.at(3600), Writes: []any{tc.w}})
			if !errors.Is(err, dynamo.ErrTransactionLimit) || errors.Is(err, idemstore.ErrStoreUnavailable) {
				t.Errorf("Commit = %v, want ErrTransactionLimit", err)
			}
			t.Log(err)
		})
	}
	if n := b.proxy.Count("TransactWriteItems"); n != 0 {
		t.Errorf("%d transactions sent through the store, want 0", n)
	}

	// At the edge of each limit: taken by DynamoDB Local and by the store.
	taken := []struct {
		name string
		w    types.TransactWriteItem
	}{
		{"38 significant digits and trailing zeros", put("t0", "v", N(strings.Repeat("1", 38)+"000"))},
		{"a number of 1E-130", put("t1", "v", N("1E-130"))},
		{"a number just below 1E+126", put("t2", "v", N("9."+strings.Repeat("9", 37)+"E+125"))},
		{"a signed number", put("t3", "v", N("+1"))},
		{"a number without an integer part", put("t4", "v", N(".5"))},
		{"32 levels of nesting", put("t5", "v", nest(32))},
		{"a key of 2048 bytes", del(key(strings.Repeat("k", 2048)))},
		{"a number set", put("t6", "v", &types.AttributeValueMemberNS{Value: []string{"1", "2.5", "-3e2"}})},
		{"placeholders used twice", update("t7", "SET #n = :v, #m = :v", map[string]string{"#n": "n", "#m": "m"}, one)},
		{"empty strings outside the key", put("t8", "v", S(""))},
	}
	for i, tc := range taken {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.store.Capabilities().CheckWrite(idemstore.Lease{Namespace: b.ns, Key: "k"}, []any{tc.w}); err != nil {
				t.Fatalf("CheckWrite = %v, want nil", err)
			}
			c := b.mustClaim(t, b.claimReq(fmt.Sprint("taken-", i), 0))
			if err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600), Writes: []any{tc.w}}); err != nil {
				t.Fatalf("Complete = %v, want nil", err)
			}
		})
	}
}

// TestSDKRefusalIsNoOutage: a request the SDK refuses before sending it
// (a required parameter missing) is a write refused for its form,
// never a store unavailable, should one reach the transaction.
func TestSDKRefusalIsNoOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	_, err := b.direct.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(b.table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}},
	}})
	if err == nil {
		t.Fatal("the SDK sent an update without an UpdateExpression")
	}
	if !dynamo.RefusedForShape(err) {
		t.Errorf("the SDK's refusal %v is not taken as a refusal for the write's form", err)
	}
	if dynamo.RefusedForShape(errors.New("connection refused")) {
		t.Error("a network error is taken as a refusal for the write's form")
	}
}
