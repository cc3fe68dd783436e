package redisstore_test

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// redisServerBinary finds the redis-server the local stack runs: in
// LAMBDAIDEM_TOOLS_DIR or the checkout's .tools, else on PATH.
func redisServerBinary(t *testing.T) string {
	t.Helper()
	addr(t) // no Redis in this environment: skip as every Redis test does
	tools := os.Getenv("LAMBDAIDEM_TOOLS_DIR")
	if tools == "" {
		tools = filepath.Join("..", ".tools")
	}
	if bin := filepath.Join(tools, "redis", "bin", "redis-server"); fileExists(bin) {
		return bin
	}
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return bin
	}
	if os.Getenv(testenv.RequireVar) == "1" {
		t.Fatalf("no redis-server in %s or on PATH", tools)
	}
	t.Skip("no redis-server in .tools or on PATH")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// privateServer starts a redis-server of its own on loopback with args,
// returns a plain client to it, and stops it when the test ends. It
// returns once the server says it accepts connections.
func privateServer(t *testing.T, bin string, args ...string) *redis.Client {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		lines := bufio.NewScanner(out)
		said := false
		for lines.Scan() {
			if !said && strings.Contains(lines.Text(), "Ready to accept connections") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	if !<-ready {
		t.Fatalf("redis-server on port %d stopped before accepting connections", port)
	}
	return newClient(t, fmt.Sprintf("127.0.0.1:%d", port))
}

// clusterNode starts a private redis-server in cluster mode and returns
// a plain client to it and its cluster bus port.
func clusterNode(t *testing.T, bin string) (*redis.Client, int) {
	t.Helper()
	bus := freePort(t)
	c := privateServer(t, bin, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf"))
	return c, bus
}

// migrating makes two cluster nodes, a owning every slot and b none, and
// returns a client to a with a function that starts and one that ends
// (cancels) the migration of slot to b.
func migrating(t *testing.T, slot int) (a *redis.Client, start, stop func()) {
	t.Helper()
	bin := redisServerBinary(t)
	ctx := t.Context()
	a, _ = clusterNode(t, bin)
	b, bbus := clusterNode(t, bin)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	bid, err := b.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	bport := strings.TrimPrefix(b.Options().Addr, "127.0.0.1:")
	must(a.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", bport, bbus).Err())
	// The handshake runs in the servers' cron: a knows b by its ID only
	// once b answered, and a serves its slots once it calls the cluster
	// up (a new node waits two seconds for that). Poll a's view, bounded
	// by the test's deadline.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		nodes, err := a.ClusterNodes(ctx).Result()
		must(err)
		info, err := a.ClusterInfo(ctx).Result()
		must(err)
		if strings.Contains(nodes, bid) && !strings.Contains(nodes, "handshake") && strings.Contains(info, "cluster_state:ok") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the nodes never met, or the cluster is not up: %s\n%s", nodes, info)
		case <-tick.C:
		}
	}
	start = func() { must(a.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", bid).Err()) }
	stop = func() { must(a.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err()) }
	return a, start, stop
}

// TestCompletionDuringSlotMigration: while a namespace's cluster slot
// migrates to another node, Redis runs a script only when every key it
// declares is still on the node, and refuses, with an error, a command of
// the script on a key the script itself deleted, after the writes before
// it. A completion then never stops half-way: its commands and the
// COMPLETED mark apply together, or nothing does, however its commands
// empty keys (a SREM or HDEL that takes every member, in one part or in
// several, with an expiry) and whatever result hash the record had; and
// once the migration is over the same completion sent again applies
// nothing twice. Before, an optimistic commit over an expired record
// deleted the record and wrote it again after running the commands, and
// a long HDEL went on after emptying its hash: Redis refused the next
// command, the counter had risen, the record was not committed, and the
// retry after the migration raised the counter again.
func TestCompletionDuringSlotMigration(t *testing.T) {
	ns := "migrating-" + rand.Text()[:8]
	client, start, stop := migrating(t, redisstore.Slot("{"+ns+"}"))
	ctx := t.Context()
	store := redisstore.New(client, "", redisstore.WithInlineResultBytes(10), redisstore.WithMaxRequestArgs(10000))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	result := []byte(strings.Repeat("r", 100)) // kept apart: the result hash exists
	claim := func(key string) idemstore.Lease {
		t.Helper()
		c, err := store.Claim(ctx, idemstore.ClaimRequest{Namespace: ns, Key: key, PayloadHash: "h", MessageID: "m-" + key,
			Now: t0, LeaseUntil: at(time.Hour), Grace: time.Second, ExpiresAt: at(2 * time.Hour)})
		if err != nil || !c.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", key, c, err)
		}
		return c.Lease
	}
	// Every open set of the namespace holds a live record, so the scripts
	// run while the slot migrates (a missing key makes Redis redirect
	// them before they start).
	claim("busy")
	if err := store.Fail(ctx, idemstore.FailRequest{Lease: claim("failed"), Now: t0, Error: "x", ExpiresAt: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: claim("dead"), Now: t0, Reason: "poison", Error: "x",
		MessageID: "m-dead", DeadLetterMessageID: "dlq", ExpiresAt: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	counter, set, hash := store.Key(ns, "counter"), store.Key(ns, "set"), store.Key(ns, "hash")
	fields := make([]string, 1500) // ten exist: the first part of the HDEL empties the hash
	for i := range fields {
		fields[i] = fmt.Sprint("f", i)
	}
	reset := func() {
		t.Helper()
		pipe := client.TxPipeline()
		pipe.Set(ctx, counter, 0, 0)
		pipe.Del(ctx, set, hash)
		pipe.SAdd(ctx, set, "a", "b")
		for _, f := range fields[:10] {
			pipe.HSet(ctx, hash, f, "v")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The commands: a counter, and in the second form, removals that
	// empty their keys, one of them in several parts.
	forms := map[string][]any{
		"a counter": {redisstore.IncrBy(counter, 1)},
		"a counter and emptying removals": {
			redisstore.IncrBy(counter, 1),
			redisstore.SRem(set, "a", "b").ExpireAt(at(3 * time.Hour)),
			redisstore.HDel(hash, fields...).ExpireAt(at(3 * time.Hour)),
		},
	}
	// check: the completion applied whole, with its record, or not at all.
	check := func(t *testing.T, what string, writes []any, err error, done bool) {
		t.Helper()
		n, _ := client.Get(ctx, counter).Int()
		left := client.Exists(ctx, set, hash).Val()
		wantLeft := int64(2)
		if len(writes) > 1 {
			wantLeft = 0
		}
		switch {
		case err == nil && done && n == 1 && left == wantLeft:
		case err != nil && !done && n == 0 && left == 2:
			t.Logf("%s: refused whole: %v", what, err)
		default:
			t.Errorf("%s: error %v, record done %v, counter %d, %d of the set and hash left: half a completion", what, err, done, n, left)
		}
	}
	for form, writes := range forms {
		key := "k-" + strconv.Itoa(len(writes))
		t.Run("optimistic commit over an expired record, "+form, func(t *testing.T) {
			// The key's earlier generation: COMPLETED with a result kept
			// apart, expired (its keys live on for the store's expiry slack).
			if _, err := store.Commit(ctx, idemstore.CommitRequest{Namespace: ns, Key: key, PayloadHash: "h", Token: "old", Now: t0,
				Status: idemstore.StatusCompleted, ExpiresAt: at(time.Second), Result: result}); err != nil {
				t.Fatal(err)
			}
			reset()
			req := idemstore.CommitRequest{Namespace: ns, Key: key, PayloadHash: "h", Token: "new", Now: at(2 * time.Second),
				Status: idemstore.StatusCompleted, ExpiresAt: at(time.Hour), Result: result, Writes: writes}
			committed := func() bool {
				rec, err := store.Get(ctx, idemstore.GetRequest{Namespace: ns, Key: key, Now: at(3 * time.Second)})
				return err == nil && rec.Status == idemstore.StatusCompleted && rec.LeaseToken == "new"
			}
			start()
			_, err := store.Commit(ctx, req)
			check(t, "during the migration", writes, err, committed())
			stop()
			_, err = store.Commit(ctx, req)
			check(t, "sent again after it", writes, err, committed())
		})
		key = "c-" + strconv.Itoa(len(writes))
		t.Run("completion with a result hash, "+form, func(t *testing.T) {
			lease := claim(key)
			// A result hash under the record's key, as an earlier completion
			// leaves one: every key the script declares exists.
			if err := client.HSet(ctx, "lambdaidem:{"+ns+"}:res:"+key, "t", "earlier", "r", "x").Err(); err != nil {
				t.Fatal(err)
			}
			reset()
			req := idemstore.CompleteRequest{Lease: lease, Now: at(time.Second), ExpiresAt: at(time.Hour), Result: result, Writes: writes}
			completed := func() bool {
				rec, err := store.Get(ctx, idemstore.GetRequest{Namespace: ns, Key: key, Now: at(2 * time.Second)})
				return err == nil && rec.Status == idemstore.StatusCompleted
			}
			start()
			err := store.Complete(ctx, req)
			check(t, "during the migration", writes, err, completed())
			stop()
			err = store.Complete(ctx, req)
			check(t, "sent again after it", writes, err, completed())
		})
	}
}
