package main

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// setupRedis is setup on the local redis-server: the command runs with
// -store from LAMBDAIDEM_STORE, on a key prefix of its own.
func setupRedis(t *testing.T) *bundle {
	t.Helper()
	addr := testenv.RedisAddr(t)
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() })
	prefix := "cli-" + rand.Text()[:10]
	return &bundle{
		table: "redis://" + addr,
		ns:    "orders",
		// The tests' clock is months behind the server's: the slack keeps
		// the server from deleting keys that are live by the tests' clock.
		store: redisstore.New(client, prefix, redisstore.WithExpirySlack(10*365*24*time.Hour)),
		env: map[string]string{
			"LAMBDAIDEM_STORE":        "redis://" + addr,
			"LAMBDAIDEM_REDIS_PREFIX": prefix,
			"LAMBDAIDEM_NAMESPACE":    "orders",
		},
	}
}

// TestRedisStore: every subcommand that touches records works on the Redis
// store the same way as on DynamoDB.
func TestRedisStore(t *testing.T) {
	t.Parallel()
	b := setupRedis(t)
	b.seed(t)

	g := decode[recordJSON](t, b.cli(t, 300, "get", "order-failed", "-json").want(t, exitOK))
	if g.Status != "FAILED" || g.Attempts != 2 {
		t.Errorf("get: %+v", g)
	}
	b.cli(t, 300, "get", "nope").want(t, exitNotFound)

	l := decode[listJSON](t, b.cli(t, 300, "list", "-json").want(t, exitOK))
	var keys []string
	for _, r := range l.Records {
		keys = append(keys, r.Key)
	}
	if strings.Join(keys, " ") != "order-poison order-stuck order-failed order-running" {
		t.Errorf("list: %v", keys)
	}
	// Listing reads one namespace's sets: all namespaces is a usage error.
	b.cli(t, 300, "list", "-namespace", "").want(t, exitUsage)

	s := decode[statsJSON](t, b.cli(t, 300, "stats", "-json").want(t, exitOK))
	if *s.Counts[idemstore.StatusInProgress] != 2 || s.Stuck != 1 || *s.Counts[idemstore.StatusFailed] != 1 ||
		*s.Counts[idemstore.StatusDeadLettered] != 1 || s.Counts[idemstore.StatusCompleted] != nil {
		t.Errorf("stats: %+v", s)
	}
	// The text speaks of the store, not of a table it does not have.
	text := b.cli(t, 300, "stats").want(t, exitOK).stdout
	if !strings.HasPrefix(text, "store ") || strings.Contains(text, "table") {
		t.Errorf("stats on Redis speaks of a table:\n%s", text)
	}
	if r := b.cli(t, 300, "stats", "-all").want(t, exitUsage); strings.Contains(r.stderr, "table") {
		t.Errorf("stats -all on Redis speaks of a table: %s", r.stderr)
	}

	b.cli(t, 300, "release", "order-running").want(t, exitRefused)
	b.cli(t, 300, "release", "order-stuck").want(t, exitOK)
	if r := decode[recordJSON](t, b.cli(t, 300, "get", "order-stuck", "-json")); r.Status != "FAILED" {
		t.Errorf("after release: %+v", r)
	}

	b.cli(t, 300, "forget", "order-running", "-yes").want(t, exitRefused)
	b.cli(t, 300, "forget", "order-done", "-yes").want(t, exitOK)
	b.cli(t, 300, "get", "order-done").want(t, exitNotFound)
	if l := b.claim(t, "orders", "order-done", 400, 30); l.Attempt != 1 {
		t.Errorf("claim after forget: attempt %d, want 1", l.Attempt)
	}

	b.cli(t, 300, "get", "k", "-store", "memcached://x").want(t, exitUsage)
}

// TestRedisRedrive: redrive's conditional reset on the Redis store leaves
// the dead-lettered record FAILED, redriven once from the copy, and get
// shows it; the key is claimed again from attempt one. A copy reset once
// is not reset again.
func TestRedisRedrive(t *testing.T) {
	t.Parallel()
	b := setupRedis(t)
	rb := &redriveBundle{bundle: b, sqs: testenv.SQS(t)}
	b.env["AWS_ENDPOINT_URL_SQS"] = testenv.Endpoint(t, testenv.SQSEndpointVar)
	b.env["AWS_REGION"], b.env["AWS_ACCESS_KEY_ID"], b.env["AWS_SECRET_ACCESS_KEY"] = "us-east-1", "test", "test"
	rb.src, rb.srcARN = rb.newQueue(t, "cli-redis-src")
	rb.dlq, _ = rb.newQueue(t, "cli-redis-dlq")
	rb.deadLetter(t, "order-9", `{"order":9}`)

	// Without -source or -to redrive does not know where copies may go.
	rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-wait", "0").want(t, exitUsage)
	moved := decode[redriveJSON](t, rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json").want(t, exitOK))
	if moved.Moved != 1 || moved.Failed != 0 || len(moved.Messages) != 1 {
		t.Fatalf("redrive: %+v", moved)
	}
	g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-9", "-json").want(t, exitOK))
	if g.Status != "FAILED" || g.Attempts != 0 || g.Redrives != 1 || g.RedrivenFrom != moved.Messages[0].DLQMessageID || g.DeadLetterReason != "" {
		t.Errorf("record after redrive: %+v; want FAILED, 0 attempts, redriven once from the copy", g)
	}
	if out := rb.cli(t, 100, "get", "order-9").want(t, exitOK).stdout; !strings.Contains(out, "redrives         1 ") {
		t.Errorf("get does not show the redrive:\n%s", out)
	}
	back := rb.receive(t, rb.src)
	if len(back) != 1 || *back[0].Body != `{"order":9}` {
		t.Fatalf("source queue after redrive: %v", back)
	}
	// The same copy cannot reset the record twice.
	if _, err := b.store.(idemstore.DeadLetterResetter).ResetDeadLetter(t.Context(), idemstore.ResetRequest{
		Namespace: rb.ns, Key: "order-9", DeadLetterMessageID: moved.Messages[0].DLQMessageID, Now: at(150),
	}); !errors.Is(err, idemstore.ErrResetRefused) {
		t.Errorf("second reset by the same copy = %v, want ErrResetRefused", err)
	}
	l := rb.claim(t, rb.ns, "order-9", 200, 30)
	if l.Attempt != 1 {
		t.Errorf("claim after redrive: attempt %d, want 1", l.Attempt)
	}
}

// TestRedisResolve: resolve and stats' count of decisions work on the
// Redis store as on DynamoDB.
func TestRedisResolve(t *testing.T) {
	t.Parallel()
	b := setupRedis(t)
	b.env["USER"] = "alice"
	for _, k := range []string{"mail-1", "mail-2"} {
		b.deadLetter(t, b.claim(t, "orders", k, 0, 30), 1, idemstore.ReasonOutcomeUnknown, "the mail server hung up")
	}
	if st := decode[statsJSON](t, b.cli(t, 1000, "stats", "-json").want(t, exitOK)); st.Uncertain != 2 {
		t.Errorf("stats: %d awaiting a decision, want 2", st.Uncertain)
	}
	// No -dlq: the applied decision leaves the copy for redrive.
	if out := b.cli(t, 1000, "resolve", "mail-1", "-applied", "-note", "delivered", "-yes").want(t, exitOK).stdout; !strings.Contains(out, "the next redrive deletes it as done") {
		t.Errorf("applied without -dlq says:\n%s", out)
	}
	b.cli(t, 1000, "resolve", "mail-2", "-abandon", "-note", "stale", "-yes").want(t, exitOK)
	if g := decode[recordJSON](t, b.cli(t, 1000, "get", "mail-1", "-json").want(t, exitOK)); g.Status != "COMPLETED" || g.Resolution != "applied" {
		t.Errorf("mail-1: %+v", g)
	}
	st := decode[statsJSON](t, b.cli(t, 1000, "stats", "-json").want(t, exitOK))
	if st.Uncertain != 0 || st.Abandoned != 1 {
		t.Errorf("stats after: %d awaiting, %d abandoned; want 0, 1", st.Uncertain, st.Abandoned)
	}
	b.cli(t, 1000, "resolve", "mail-2", "-not-applied", "-without-copy", "-note", "x", "-yes").want(t, exitRefused)
}
