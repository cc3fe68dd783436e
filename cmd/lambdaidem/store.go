package main

import (
	"context"
	"iter"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// adminStore is what the subcommands need of a store. *dynamo.Admin is
// one; a Redis store is one through redisAdmin. The requests are the
// DynamoDB store's, which the subcommands were written against.
type adminStore interface {
	Get(ctx context.Context, req lambdaidem.GetRequest) (lambdaidem.Record, error)
	ListOpen(ctx context.Context, req dynamo.ListOpenRequest) iter.Seq2[lambdaidem.Record, error]
	Release(ctx context.Context, req dynamo.ReleaseRequest) (lambdaidem.Record, error)
	Forget(ctx context.Context, req dynamo.ForgetRequest) (lambdaidem.Record, error)
	Count(ctx context.Context, req dynamo.CountRequest) (int, error)
	// ResetDeadLetter is redrive's conditional reset.
	lambdaidem.DeadLetterResetter
}

var _ adminStore = (*dynamo.Admin)(nil)

// isRedis reports whether -store names a Redis server.
func (c *common) isRedis() bool {
	scheme, _, _ := strings.Cut(c.store, "://")
	switch scheme {
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		return true
	}
	return false
}

// checkStore validates -store and, for Redis, names the store in messages
// where a table name would go (without its password).
func (c *common) checkStore() error {
	switch {
	case c.store == "" || c.store == "dynamodb":
		c.store = ""
		return nil
	case !c.isRedis():
		return usagef("-store %q: want dynamodb, redis://HOST:PORT[/DB], rediss://... (TLS) or redis+cluster://... / rediss+cluster://...", c.store)
	}
	u, err := url.Parse(c.store)
	if err != nil {
		return usagef("-store: %v", err)
	}
	u.User = nil
	c.table = u.String()
	return nil
}

// redisAdmin opens the Redis store -store names: redis:// and rediss://
// for one endpoint, redis+cluster:// and rediss+cluster:// for cluster mode
// (ElastiCache Serverless, MemoryDB), with go-redis's URL options. Keys
// carry the prefix in LAMBDAIDEM_REDIS_PREFIX, by default the store's.
func (a *app) redisAdmin(c *common) (adminStore, error) {
	scheme, rest, _ := strings.Cut(c.store, "://")
	var client redis.UniversalClient
	if base, ok := strings.CutSuffix(scheme, "+cluster"); ok {
		o, err := redis.ParseClusterURL(base + "://" + rest)
		if err != nil {
			return nil, usagef("-store: %v", err)
		}
		client = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(c.store)
		if err != nil {
			return nil, usagef("-store: %v", err)
		}
		client = redis.NewClient(o)
	}
	return redisAdmin{redisstore.New(client, redisstore.Options{Prefix: a.env("LAMBDAIDEM_REDIS_PREFIX")})}, nil
}

// redisAdmin adapts the Redis store to the subcommands' requests. Get and
// ResetDeadLetter (redrive's conditional reset) are the store's own.
type redisAdmin struct{ *redisstore.Store }

func (r redisAdmin) ListOpen(ctx context.Context, req dynamo.ListOpenRequest) iter.Seq2[lambdaidem.Record, error] {
	return r.Store.ListOpen(ctx, redisstore.ListOpenRequest{
		Status: req.Status, Namespace: req.Namespace, UpdatedBefore: req.UpdatedBefore, Now: req.Now, PageSize: int(req.PageSize),
	})
}

func (r redisAdmin) Release(ctx context.Context, req dynamo.ReleaseRequest) (lambdaidem.Record, error) {
	return r.Store.Release(ctx, redisstore.ReleaseRequest{
		Namespace: req.Namespace, Key: req.Key, Token: req.Token, Now: req.Now, Force: req.Force, Note: req.Note,
	})
}

func (r redisAdmin) Forget(ctx context.Context, req dynamo.ForgetRequest) (lambdaidem.Record, error) {
	return r.Store.Forget(ctx, redisstore.ForgetRequest{Namespace: req.Namespace, Key: req.Key, Now: req.Now, Force: req.Force})
}

func (r redisAdmin) Count(ctx context.Context, req dynamo.CountRequest) (int, error) {
	n, err := r.Store.Count(ctx, redisstore.CountRequest{
		Status: req.Status, Namespace: req.Namespace, LeaseEndedBefore: req.LeaseEndedBefore, Now: req.Now,
	})
	if err == nil && req.Progress != nil {
		req.Progress(dynamo.CountProgress{Pages: 1, Counted: n})
	}
	return n, err
}
