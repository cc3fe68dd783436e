package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// OpenIndex is the name of the sparse global secondary index over
// unfinished records: hash key open_status (the record's status while it is
// IN_PROGRESS, FAILED or DEAD_LETTERED; absent once COMPLETED), range key
// updated_at. Operators list stuck and failed records from it without a
// table scan.
const OpenIndex = "open_status-updated_at"

// TableAPI is the part of *dynamodb.Client that CreateTable uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableAPI = (*dynamodb.Client)(nil)

// TableOptions configures CreateTable. The zero value is what production
// wants.
type TableOptions struct {
	// NoTTL leaves the table's TTL off. Tests set it: DynamoDB Local deletes
	// expired items within seconds, where AWS takes up to days, and the
	// store's correctness must never depend on either (expiry is enforced
	// in every condition). Default false: TTL on expires_at.
	NoTTL bool
	// PollInterval is how often CreateTable checks whether the table is
	// ACTIVE. Default 200ms.
	PollInterval time.Duration
}

// ErrTableShape: CreateTable found a table of that name already there whose
// keys or index are not the store's. Nothing was changed.
var ErrTableShape = errors.New("dynamo: existing table has another shape")

// CreateTable creates a table for the store: on-demand billing, string
// partition key "pk", the sparse index OpenIndex, and TTL on expires_at
// unless opts.NoTTL. It returns once the table and its index are ACTIVE, or
// when ctx ends. It is meant for tests and tools; production tables belong
// in infrastructure code (the project's template.yaml defines the same
// table).
//
// A table of that name that already exists with the store's key schema and
// index counts as created: that is what a create looks like when its first
// answer was lost and the SDK's retry was refused with
// ResourceInUseException, and it makes CreateTable safe to run twice. A
// table of another shape is refused with ErrTableShape.
func CreateTable(ctx context.Context, client TableAPI, table string, opts TableOptions) error {
	if err := CheckTableName(table); err != nil {
		return fmt.Errorf("dynamo: create table: %w", err)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	_, err := client.CreateTable(ctx, tableInput(table))
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		err = checkShape(ctx, client, table)
	}
	if err != nil {
		return fmt.Errorf("dynamo: create table %q: %w", table, err)
	}
	if err := waitActive(ctx, client, table, opts.PollInterval); err != nil {
		return err
	}
	if opts.NoTTL {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil && !ttlAlreadyOn(err) {
		return fmt.Errorf("dynamo: enable TTL on %q: %w", table, err)
	}
	return nil
}

// ttlAlreadyOn reports DynamoDB's refusal to enable TTL that is already
// enabled (on a table CreateTable found in place).
func ttlAlreadyOn(err error) bool {
	var ve *smithy.GenericAPIError
	return errors.As(err, &ve) && ve.Code == "ValidationException" &&
		strings.Contains(strings.ToLower(ve.Message), "already enabled")
}

// tableInput is the store's table: see CreateTable.
func tableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrOpenStatus), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrUpdatedAt), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(OpenIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrOpenStatus), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrUpdatedAt), KeyType: types.KeyTypeRange},
			},
			// ALL: the index holds only unfinished records (no results),
			// and listing them should not cost a read per row.
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	}
}

// checkShape returns nil when the existing table has the key schema,
// attribute types and open-records index of tableInput, and ErrTableShape
// naming the first difference otherwise.
func checkShape(ctx context.Context, client TableAPI, table string) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("it exists, and describing it failed: %w", err)
	}
	want := tableInput(table)
	got := out.Table
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range got.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	if d := keyDiff(want.KeySchema, got.KeySchema, want.AttributeDefinitions, attrTypes); d != "" {
		return fmt.Errorf("%w: key %s", ErrTableShape, d)
	}
	wantIdx := want.GlobalSecondaryIndexes[0]
	for _, g := range got.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != OpenIndex {
			continue
		}
		if d := keyDiff(wantIdx.KeySchema, g.KeySchema, want.AttributeDefinitions, attrTypes); d != "" {
			return fmt.Errorf("%w: index %s: key %s", ErrTableShape, OpenIndex, d)
		}
		if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeAll {
			return fmt.Errorf("%w: index %s does not project ALL attributes", ErrTableShape, OpenIndex)
		}
		return nil
	}
	return fmt.Errorf("%w: no index %s", ErrTableShape, OpenIndex)
}

// waitActive polls until the table and all its indexes are ACTIVE.
func waitActive(ctx context.Context, client TableAPI, table string, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var rnf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &rnf):
			// Eventually consistent right after CreateTable: keep waiting.
		case err != nil:
			return fmt.Errorf("dynamo: describe table %q: %w", table, err)
		case active(out.Table):
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamo: table %q not ACTIVE: %w", table, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// keyDiff describes how key schema got differs from want (names, roles and
// attribute types), or returns "" when they agree.
func keyDiff(want, got []types.KeySchemaElement, defs []types.AttributeDefinition, gotTypes map[string]types.ScalarAttributeType) string {
	wantTypes := map[string]types.ScalarAttributeType{}
	for _, d := range defs {
		wantTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	w, g := renderKey(want, wantTypes), renderKey(got, gotTypes)
	if w == g {
		return ""
	}
	return fmt.Sprintf("is %s, want %s", g, w)
}

// renderKey writes a key schema as "name ROLE (TYPE), ...".
func renderKey(ks []types.KeySchemaElement, typeOf map[string]types.ScalarAttributeType) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		name := aws.ToString(k.AttributeName)
		parts[i] = fmt.Sprintf("%s %s (%s)", name, k.KeyType, typeOf[name])
	}
	return strings.Join(parts, ", ")
}
