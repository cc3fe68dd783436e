package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// addr is the local redis-server's address, from LAMBDAIDEM_REDIS_ADDR
// (set by localstack/stack.sh). Without it the test skips, or fails under
// LAMBDAIDEM_REQUIRE_SERVICES=1 (unless LAMBDAIDEM_REDIS=0).
func addr(t *testing.T) string {
	t.Helper()
	return testenv.RedisAddr(t)
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
