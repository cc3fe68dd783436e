package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The floor: the bare DynamoDB requests a delivery cannot do without,
// issued directly with the SDK. Their shape is the DynamoDB store's
// (dynamo/store.go): the same attributes, update and condition
// expressions, return values and table, so the only difference between a
// path and its floor is what lambdaidem does around the requests. They
// are written out here, not borrowed from the store, so a change in the
// store's requests shows up as a change in the ratio.

// floorClaimUpdate and floorClaimCondition are the store's plain claim:
// absent, or FAILED with the same hash, unexpired.
const (
	floorClaimUpdate = "SET #status = :inprogress, #open_status = :inprogress, #lease_token = :token, " +
		"#lease_until = :lease_until, #payload_hash = :hash, #message_id = :message_id, #expires_at = :expires_at, " +
		"#updated_at = :now_ms, #schema_version = :schema, " +
		"#generation = if_not_exists(#generation, :generation), #first_attempt_at = if_not_exists(#first_attempt_at, :now_ms) " +
		"ADD #attempts :one, #claim :one"
	floorClaimCondition = "attribute_not_exists(#pk) OR (#status = :failed AND #payload_hash = :hash AND " +
		"(attribute_not_exists(#expires_at) OR #expires_at >= :now_s))"
	floorCompleteUpdate = "SET #status = :completed, #expires_at = :expires_at, #updated_at = :now_ms " +
		"REMOVE #open_status, #result, #result_until"
	floorCompleteCondition = "#lease_token = :token AND #status = :inprogress AND " +
		"(attribute_not_exists(#expires_at) OR #expires_at >= :now_s)"
)

func names(attrs ...string) map[string]string {
	m := make(map[string]string, len(attrs))
	for _, a := range attrs {
		m["#"+a] = a
	}
	return m
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// floor issues the bare requests against one table of the store's layout.
type floor struct {
	client *dynamodb.Client
	table  string
	ns     string
	hash   string
}

// claim is one claim-shaped UpdateItem. It returns the token it wrote and
// whether its condition held; a refused condition brings the item back
// (ALL_OLD), as the store's refused claim does.
func (f *floor) claim(ctx context.Context, key string) (token string, ok bool, err error) {
	now := time.Now()
	token = rand.Text()
	_, err = f.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(f.table),
		Key:                 map[string]types.AttributeValue{"pk": s(f.ns + "#" + key)},
		UpdateExpression:    aws.String(floorClaimUpdate),
		ConditionExpression: aws.String(floorClaimCondition),
		ExpressionAttributeNames: names("pk", "status", "open_status", "lease_token", "lease_until", "payload_hash",
			"message_id", "expires_at", "updated_at", "schema_version", "generation", "first_attempt_at", "attempts", "claim"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inprogress":  s("IN_PROGRESS"),
			":failed":      s("FAILED"),
			":token":       s(token),
			":lease_until": n(now.Add(30 * time.Second).UnixMilli()),
			":hash":        s(f.hash),
			":message_id":  s(key),
			":expires_at":  n(now.Add(14 * 24 * time.Hour).Unix()),
			":now_ms":      n(now.UnixMilli()),
			":now_s":       n(now.Unix()),
			":schema":      n(1),
			":generation":  s(rand.Text()),
			":one":         n(1),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return "", false, fmt.Errorf("floor: refused claim of %q brought no item back", key)
		}
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("floor: claim %q: %w", key, err)
	}
	return token, true, nil
}

// complete is one complete-shaped UpdateItem, fenced on the token.
func (f *floor) complete(ctx context.Context, key, token string) error {
	now := time.Now()
	_, err := f.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(f.table),
		Key:                      map[string]types.AttributeValue{"pk": s(f.ns + "#" + key)},
		UpdateExpression:         aws.String(floorCompleteUpdate),
		ConditionExpression:      aws.String(floorCompleteCondition),
		ExpressionAttributeNames: names("status", "open_status", "result", "result_until", "expires_at", "updated_at", "lease_token"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":completed":  s("COMPLETED"),
			":inprogress": s("IN_PROGRESS"),
			":token":      s(token),
			":expires_at": n(now.Add(24 * time.Hour).Unix()),
			":now_ms":     n(now.UnixMilli()),
			":now_s":      n(now.Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return fmt.Errorf("floor: complete %q: %w", key, err)
	}
	return nil
}

// first is the floor of a first delivery: claim, then complete.
func (f *floor) first(ctx context.Context, key string) error {
	token, ok, err := f.claim(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("floor: claim of fresh key %q refused", key)
	}
	return f.complete(ctx, key, token)
}

// duplicate is the floor of a duplicate: one claim-shaped UpdateItem that
// fails its condition against a completed item and brings it back.
func (f *floor) duplicate(ctx context.Context, key string) error {
	_, ok, err := f.claim(ctx, key)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("floor: duplicate claim of %q was not refused", key)
	}
	return nil
}
