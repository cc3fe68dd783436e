package compat

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// storeKind is one of the stores of the matrix.
type storeKind struct {
	name string
	// open returns the store, skipping t when its service is not there.
	open func(t *testing.T) *env
	// writes names the completion writes the store commits ("" none), for
	// the document.
	writes string
}

// env is an opened store, with its completion writes.
type env struct {
	store idemstore.Store
	// effects makes and reads the store's completion writes; nil when it
	// commits none.
	effects *effects
	// bare, when set, is the store as built without what commits its
	// completion writes (the in-memory store without an applier): it
	// must refuse the same declaration when a handler is built.
	bare idemstore.Store
}

// effects are a store's completion writes.
type effects struct {
	// declare is WithCompletionWrites of the store's write type.
	declare lambdaidem.Option
	// insert returns a write storing value under name, refused by its own
	// condition when name holds a value.
	insert func(ns, name, value string) any
	read   func(ctx context.Context, ns, name string) (string, error)
}

var stores = []storeKind{
	{name: "in-memory", open: openMemory, writes: "`types.TransactWriteItem` with `memstore.WithCompletionWrites(db)`, `db` a `dynamotest.DB`; without it none, refused (`lambdaidem.ErrUnsupportedWrite`)"},
	{name: "DynamoDB", open: openDynamoDB, writes: "`types.TransactWriteItem`"},
	{name: "Redis", open: openRedis, writes: "`redisstore.Command`"},
}

// effectsTable is the table the cells' completion writes go to, keyed
// by pk.
var effectsTable = dynamotest.Table{Name: "compat-effects", HashKey: "pk"}

// openMemory is the in-memory store committing DynamoDB writes to a
// dynamotest.DB, as the kit runs a transactional handler.
func openMemory(t *testing.T) *env {
	db := dynamotest.New(effectsTable)
	return &env{
		store:   memstore.New(memstore.WithCompletionWrites(db)),
		effects: dynamoEffects(db.GetItem, effectsTable.Name),
		bare:    memstore.New(),
	}
}

// getItem is DynamoDB's GetItem, of the SDK's client or a dynamotest.DB.
type getItem func(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)

// dynamoEffects are DynamoDB writes to table: a conditional Put per
// effect, read back with get.
func dynamoEffects(get getItem, table string) *effects {
	pk := func(ns, name string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: ns + "/" + name}}
	}
	return &effects{
		declare: lambdaidem.WithCompletionWrites[types.TransactWriteItem](),
		insert: func(ns, name, value string) any {
			item := pk(ns, name)
			item["value"] = &types.AttributeValueMemberS{Value: value}
			return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		},
		read: func(ctx context.Context, ns, name string) (string, error) {
			out, err := get(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: pk(ns, name), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return "", err
			}
			if v, ok := out.Item["value"].(*types.AttributeValueMemberS); ok {
				return v.Value, nil
			}
			return "", nil
		},
	}
}

func openDynamoDB(t *testing.T) *env {
	client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 2 * time.Second, MaxBackoff: 20 * time.Millisecond}))
	table, fx := testenv.Name("compat"), testenv.Name("compat-effects")
	for _, name := range []string{table, fx} {
		if err := dynamo.CreateTable(t.Context(), client, name, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
			t.Fatalf("create table %s: %v", name, err)
		}
		t.Cleanup(func() {
			if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
				t.Logf("delete table %s: %v", name, err)
			}
		})
	}
	return &env{store: dynamo.NewAdmin(client, table), effects: dynamoEffects(client.GetItem, fx)}
}

func openRedis(t *testing.T) *env {
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	prefix := "compat-" + rand.Text()[:10]
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = client.Unlink(ctx, iter.Val()).Err()
		}
		_ = client.Close()
	})
	store := redisstore.New(client, prefix)
	return &env{store: store, effects: &effects{
		declare: lambdaidem.WithCompletionWrites[redisstore.Command](),
		insert:  func(ns, name, value string) any { return redisstore.SetNX(store.Key(ns, name), value) },
		read: func(ctx context.Context, ns, name string) (string, error) {
			v, err := client.Get(ctx, store.Key(ns, name)).Result()
			if errors.Is(err, redis.Nil) {
				return "", nil
			}
			return v, err
		},
	}}
}
