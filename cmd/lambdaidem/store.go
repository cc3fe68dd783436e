package main

import (
	"net/url"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

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

// redisStore opens the Redis store -store names (redisstore.NewClient's
// URL forms: redis:// and rediss:// for one endpoint, redis+cluster:// and
// rediss+cluster:// for cluster mode). Keys carry the prefix in
// LAMBDAIDEM_REDIS_PREFIX, by default the store's.
func (a *app) redisStore(c *common) (idemstore.Admin, error) {
	client, err := redisstore.NewClient(c.store)
	if err != nil {
		return nil, usagef("-store: %v", err)
	}
	return redisstore.New(client, a.env("LAMBDAIDEM_REDIS_PREFIX")), nil
}
