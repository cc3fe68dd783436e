package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// complete completes a fresh claim of key with writes, returning the lease
// and Complete's error.
func (b *bundle) completeWith(t *testing.T, key string, writes ...any) (idemstore.Lease, error) {
	t.Helper()
	c, err := b.direct.Claim(t.Context(), b.claimReq(key, 0))
	if err != nil || !c.Claimed {
		t.Fatalf("Claim(%s) = %+v, %v", key, c, err)
	}
	return c.Lease, b.store.Complete(t.Context(), idemstore.CompleteRequest{
		Lease: c.Lease, Now: b.at(1), Result: []byte(`"r"`), ExpiresAt: b.at(3600), Writes: writes,
	})
}

// dump reads what the test's keys hold, by type.
func dump(t *testing.T, c redis.UniversalClient, keys ...string) map[string]any {
	t.Helper()
	ctx := t.Context()
	out := map[string]any{}
	for _, k := range keys {
		kind, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch kind {
		case "none":
			continue
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		out[k+" ("+kind+")"] = v
	}
	return out
}

// Every command applies with the completion.
func TestCommandsApply(t *testing.T) {
	b := setup(t, 2)
	client := b.direct.Client()
	k := func(name string) string { return b.direct.Key(b.ns, name) }
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(client.Set(ctx, k("gone"), "x", 0).Err())
	must(client.HSet(ctx, k("h2"), "a", "1", "b", "2").Err())
	must(client.SAdd(ctx, k("s2"), "a", "b").Err())
	must(client.Set(ctx, k("n"), "40", 0).Err())
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	_, err := b.completeWith(t, "k",
		redisstore.Set(k("s"), "v").ExpireAt(until),
		redisstore.IncrBy(k("n"), 2),
		redisstore.IncrBy(k("n0"), -3),
		redisstore.HSet(k("h"), "f", "v", "g", "w"),
		redisstore.HIncrBy(k("hi"), "count", 5),
		redisstore.HDel(k("h2"), "a"),
		redisstore.RPush(k("l"), "a", "b"),
		redisstore.LPush(k("l2"), "a", "b"),
		redisstore.SAdd(k("set"), "m"),
		redisstore.SRem(k("s2"), "a"),
		redisstore.ZAdd(k("z"), 1.5, "m"),
		redisstore.Del(k("gone")),
		&redisstore.Command{Op: redisstore.OpSet, Key: k("ptr"), Args: []string{"p"}},
	)
	if err != nil {
		t.Fatalf("Complete with every command: %v", err)
	}
	got := dump(t, client, k("s"), k("n"), k("n0"), k("h"), k("hi"), k("h2"), k("l"), k("l2"), k("set"), k("s2"), k("z"), k("gone"), k("ptr"))
	want := map[string]any{
		k("s") + " (string)":   "v",
		k("n") + " (string)":   "42",
		k("n0") + " (string)":  "-3",
		k("h") + " (hash)":     map[string]string{"f": "v", "g": "w"},
		k("hi") + " (hash)":    map[string]string{"count": "5"},
		k("h2") + " (hash)":    map[string]string{"b": "2"},
		k("l") + " (list)":     []string{"a", "b"},
		k("l2") + " (list)":    []string{"b", "a"},
		k("set") + " (set)":    []string{"m"},
		k("s2") + " (set)":     []string{"b"},
		k("z") + " (zset)":     []redis.Z{{Score: 1.5, Member: "m"}},
		k("ptr") + " (string)": "p",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("keys after the completion (-want +got):\n%s", d)
	}
	if at, err := client.PExpireTime(ctx, k("s")).Result(); err != nil || !time.UnixMilli(int64(at/time.Millisecond)).Equal(until) {
		t.Errorf("expiry of %s = %v, %v; want %v", k("s"), at, err, until)
	}
	if r := b.get(t, "k", 1); r.Status != idemstore.StatusCompleted {
		t.Errorf("record %s, want COMPLETED", r.Status)
	}
}

// A command that refuses the completion refuses all of it: no command
// applies, earlier ones included, and the record stays as it was.
func TestCommandRefusals(t *testing.T) {
	b := setup(t, 2)
	client := b.direct.Client()
	k := func(name string) string { return b.direct.Key(b.ns, name) }
	ctx := t.Context()
	for key, v := range map[string]any{"str": "text", "num": "10", "big": "9007199254740990", "zero": "05"} {
		if err := client.Set(ctx, k(key), v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.HSet(ctx, k("hash"), "f", "v", "n", "3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.RPush(ctx, k("list"), "a").Err(); err != nil {
		t.Fatal(err)
	}
	marker := redisstore.Set(k("marker"), "applied")
	for _, tc := range []struct {
		name   string
		cmd    redisstore.Command
		reason string
	}{
		{"SetNX on an existing key", redisstore.SetNX(k("str"), "x"), "guard"},
		{"HSetNX on an existing field", redisstore.HSetNX(k("hash"), "f", "x"), "guard"},
		{"exists on a missing key", redisstore.Set(k("a"), "x").If(redisstore.Guard{Test: redisstore.TestExists}), "guard"},
		{"exists on a missing field", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("hash"), Field: "nope", Test: redisstore.TestExists}), "guard"},
		{"equal", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("str"), Test: redisstore.TestEqual, Value: "other"}), "guard"},
		{"equal on a missing key", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("missing"), Test: redisstore.TestEqual, Value: ""}), "guard"},
		{"at least", redisstore.IncrBy(k("num"), -11).If(redisstore.Guard{Test: redisstore.TestAtLeast, Value: "11"}), "guard"},
		{"at most on a field", redisstore.HIncrBy(k("hash"), "n", 1).If(redisstore.Guard{Field: "n", Test: redisstore.TestAtMost, Value: "2"}), "guard"},
		{"at least on text", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("str"), Test: redisstore.TestAtLeast, Value: "0"}), "guard"},
		{"a value test on a list", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("list"), Test: redisstore.TestEqual, Value: "a"}), "guard"},
		{"a field of a list", redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("list"), Field: "f", Test: redisstore.TestAbsent}), "guard"},
		{"HSET on a string", redisstore.HSet(k("str"), "f", "v"), "type"},
		{"RPUSH on a hash", redisstore.RPush(k("hash"), "v"), "type"},
		{"INCRBY on a list", redisstore.IncrBy(k("list"), 1), "type"},
		{"INCRBY on text", redisstore.IncrBy(k("str"), 1), "integer"},
		{"INCRBY on a leading zero", redisstore.IncrBy(k("zero"), 1), "integer"},
		{"INCRBY beyond 2^53", redisstore.IncrBy(k("big"), 2), "integer"},
		{"HINCRBY on text", redisstore.HIncrBy(k("hash"), "f", 1), "integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(t, client, k("str"), k("num"), k("big"), k("zero"), k("hash"), k("list"), k("a"), k("marker"))
			lease, err := b.completeWith(t, strings.ReplaceAll(tc.name, " ", "-"), marker, tc.cmd)
			var ce *redisstore.CommandError
			if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrWriteRefused) || ce.Index != 1 || ce.Reason != tc.reason || ce.Key != tc.cmd.Key {
				t.Fatalf("Complete = %v, want a CommandError for write 1 (%s), reason %q, matching ErrWriteRefused", err, tc.cmd.Key, tc.reason)
			}
			if d := cmp.Diff(before, dump(t, client, k("str"), k("num"), k("big"), k("zero"), k("hash"), k("list"), k("a"), k("marker"))); d != "" {
				t.Errorf("keys changed by the refused completion (-before +after):\n%s", d)
			}
			if r := b.get(t, lease.Key, 1); r.Status != idemstore.StatusInProgress || r.LeaseToken != lease.Token {
				t.Errorf("record after the refusal: %s under %q, want IN_PROGRESS under the lease", r.Status, r.LeaseToken)
			}
		})
	}

	// Guards that hold let the completion through.
	_, err := b.completeWith(t, "held",
		redisstore.IncrBy(k("num"), -10).If(redisstore.Guard{Test: redisstore.TestAtLeast, Value: "10"}),
		redisstore.Set(k("a"), "x").If(redisstore.Guard{Key: k("str"), Test: redisstore.TestEqual, Value: "text"}),
		redisstore.HSet(k("b"), "f", "v").If(redisstore.Guard{Key: k("hash"), Field: "n", Test: redisstore.TestAtMost, Value: "3"}),
		redisstore.Set(k("c"), "x").If(redisstore.Guard{Key: k("list"), Test: redisstore.TestExists}),
		redisstore.HSetNX(k("hash"), "new", "v"),
		redisstore.IncrBy(k("counter"), 1).If(redisstore.Guard{Test: redisstore.TestAtMost, Value: "0"}), // missing counts as 0
	)
	if err != nil {
		t.Fatalf("Complete with guards that hold: %v", err)
	}
	if v, _ := client.Get(ctx, k("num")).Result(); v != "0" {
		t.Errorf("num = %q, want 0", v)
	}
}

// Writes the store could never run are refused before anything is sent.
func TestCommandsRefusedBeforeSending(t *testing.T) {
	b := setup(t, 2)
	k := func(name string) string { return b.direct.Key(b.ns, name) }
	// Keys surely in another slot than the record's.
	elsewhere := func(key string) string {
		for redisstore.Slot(key) == redisstore.Slot(k("x")) {
			key += "-"
		}
		return key
	}
	other := elsewhere(b.direct.Key(b.ns+"-other", "x"))
	for _, tc := range []struct {
		name  string
		write any
		want  error
	}{
		{"a DynamoDB write", struct{ Table string }{"effects"}, idemstore.ErrUnsupportedWrite},
		{"a nil pointer", (*redisstore.Command)(nil), redisstore.ErrInvalidCommand},
		{"an unknown op", redisstore.Command{Op: "EVAL", Key: k("a"), Args: []string{"return 1"}}, redisstore.ErrInvalidCommand},
		{"no key", redisstore.Set("", "v"), redisstore.ErrInvalidCommand},
		{"SET without a value", redisstore.Command{Op: redisstore.OpSet, Key: k("a")}, redisstore.ErrInvalidCommand},
		{"SET with options", redisstore.Command{Op: redisstore.OpSet, Key: k("a"), Args: []string{"v", "NX"}}, redisstore.ErrInvalidCommand},
		{"HSET of an odd count", redisstore.HSet(k("a"), "f"), redisstore.ErrInvalidCommand},
		{"INCRBY of text", redisstore.Command{Op: redisstore.OpIncrBy, Key: k("a"), Args: []string{"one"}}, redisstore.ErrInvalidCommand},
		{"INCRBY of a leading zero", redisstore.Command{Op: redisstore.OpIncrBy, Key: k("a"), Args: []string{"01"}}, redisstore.ErrInvalidCommand},
		{"INCRBY beyond 2^53", redisstore.IncrBy(k("a"), 1<<53), redisstore.ErrInvalidCommand},
		{"ZADD of a bad score", redisstore.Command{Op: redisstore.OpZAdd, Key: k("a"), Args: []string{"0x1p-2", "m"}}, redisstore.ErrInvalidCommand},
		{"an unknown test", redisstore.Set(k("a"), "v").If(redisstore.Guard{Test: "gt"}), redisstore.ErrInvalidCommand},
		{"a guard of text", redisstore.Set(k("a"), "v").If(redisstore.Guard{Test: redisstore.TestAtLeast, Value: "x"}), redisstore.ErrInvalidCommand},
		{"the record itself", redisstore.Del("lambdaidem:{" + b.ns + "}:r:k"), redisstore.ErrInvalidCommand},
		{"an open set", redisstore.Del("lambdaidem:{" + b.ns + "}:open:FAILED"), redisstore.ErrInvalidCommand},
		{"another namespace's slot", redisstore.Set(other, "v"), redisstore.ErrCrossSlot},
		{"a key without a tag", redisstore.Set(elsewhere("plain-key"), "v"), redisstore.ErrCrossSlot},
		{"a guard in another slot", redisstore.Set(k("a"), "v").If(redisstore.Guard{Key: other, Test: redisstore.TestExists}), redisstore.ErrCrossSlot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.proxy.ResetCounts()
			lease, err := b.completeWith(t, strings.ReplaceAll(tc.name, " ", "-"), tc.write)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Complete = %v, want %v", err, tc.want)
			}
			if n := b.proxy.Count("EVALSHA"); n != 0 {
				t.Errorf("%d scripts sent, want none", n)
			}
			if r := b.get(t, lease.Key, 1); r.Status != idemstore.StatusInProgress {
				t.Errorf("record %s, want IN_PROGRESS", r.Status)
			}
		})
	}
	// Two commands on one key.
	_, err := b.completeWith(t, "twice", redisstore.Set(k("a"), "1"), redisstore.IncrBy(k("a"), 1))
	if !errors.Is(err, redisstore.ErrInvalidCommand) {
		t.Fatalf("two commands on one key = %v, want ErrInvalidCommand", err)
	}
}

// A completion whose reply was lost is re-sent by the client and
// recognised by its token: its commands apply once.
func TestLostCompletionReplyAppliesCommandsOnce(t *testing.T) {
	b := setup(t, 2)
	counter := b.direct.Key(b.ns, "counter")
	c, err := b.direct.Claim(t.Context(), b.claimReq("k", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	b.dropNextReply()
	err = b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600),
		Writes: []any{redisstore.IncrBy(counter, 1), redisstore.RPush(b.direct.Key(b.ns, "log"), "k")}})
	if err != nil {
		t.Fatalf("Complete after a lost reply: %v", err)
	}
	if n := b.proxy.Count("EVALSHA"); n != 2 {
		t.Errorf("proxy saw %d EVALSHA, want 2 (one re-send)", n)
	}
	if v, err := b.direct.Client().Get(t.Context(), counter).Result(); err != nil || v != "1" {
		t.Errorf("counter = %q, %v; want 1: the commands applied once", v, err)
	}
}

// Slot agrees with the server's CLUSTER KEYSLOT, when the server is in
// cluster mode.
func TestSlot(t *testing.T) {
	client := newClient(t, addr(t))
	keys := []string{"", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "lambdaidem:{orders}:x:ledger", "{}x", "ü{ñ}"}
	for _, key := range keys {
		want, err := client.ClusterKeySlot(t.Context(), key).Result()
		if err != nil {
			t.Skipf("CLUSTER KEYSLOT: %v (not a cluster)", err)
		}
		if got := redisstore.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, server says %d", key, got, want)
		}
	}
}

// A handler learns of a command outside the record's slot when it adds
// it, and a store that cannot commit commands is refused when the handler
// is built.
func TestCommandsThroughTheDecorator(t *testing.T) {
	b := setup(t, 2)
	var added error
	ledger := func(ns string) string { return b.direct.Key(ns, "ledger") }
	elsewhere := "elsewhere"
	for redisstore.Slot(ledger(elsewhere)) == redisstore.Slot(ledger(b.ns)) {
		elsewhere += "-"
	}
	h := lambdaidem.SQS(b.direct, func(ctx context.Context, m events.SQSMessage) error {
		if added = lambdaidem.AddCompletionWrite(ctx, redisstore.Set(ledger(elsewhere), m.MessageId)); added == nil {
			return errors.New("a command outside the slot was accepted")
		}
		return lambdaidem.AddCompletionWrite(ctx, redisstore.RPush(ledger(b.ns), m.MessageId))
	}, lambdaidem.WithNamespace(b.ns), lambdaidem.WithCompletionWrites[redisstore.Command]())
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "{}", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
	resp, err := h(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("SQS = %+v, %v", resp, err)
	}
	if !errors.Is(added, redisstore.ErrCrossSlot) {
		t.Errorf("AddCompletionWrite outside the slot = %v, want ErrCrossSlot", added)
	}
	if got, _ := b.direct.Client().LRange(t.Context(), ledger(b.ns), 0, -1).Result(); !cmp.Equal(got, []string{"m1"}) {
		t.Errorf("ledger = %v, want [m1]", got)
	}

	err = lambdaidem.Check(func() {
		lambdaidem.SQS(b.direct, func(context.Context, events.SQSMessage) error { return nil },
			lambdaidem.WithNamespace(b.ns), lambdaidem.WithCompletionWrites[storetest.Effects]())
	})
	var ce *idemstore.ConfigError
	if !errors.As(err, &ce) || ce.Store != "Redis" || !errors.Is(err, idemstore.ErrUnsupportedWrite) {
		t.Errorf("a write type the Redis store does not commit: %v, want a ConfigError naming Redis and ErrUnsupportedWrite", err)
	}
}
