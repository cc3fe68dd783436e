package redisstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// A drawn completion: its commands, what its keys held before, and the
// position of the command drawn to refuse the completion (-1: none).
type drawn struct {
	cmds    []any
	keys    []string
	before  func() // writes the keys' contents before the call
	fails   int
	tooLong bool // the failing command makes the request too long
}

// big is how many values an oversized command carries: more than Lua's
// unpack takes at once (about 8,000).
const big = 9000

// requestLimit is the test store's WithMaxRequestArgs: five commands of
// 2 × big arguments fit, a command of requestLimit values does not.
const requestLimit = 100_000

// draw makes n random commands on keys of the record's slot: every kind
// of command, some with more arguments than unpack takes, and, when fail
// is set, one of them (drawn) unable to apply for a reason of the data: a
// key holding another type, an integer that is not one or would overflow,
// a guard that does not hold.
func (b *bundle) draw(t *testing.T, r *rand.Rand, n int, fail bool) drawn {
	ctx := t.Context()
	client := b.direct.Client()
	d := drawn{fails: -1}
	if fail {
		d.fails = r.IntN(n)
	}
	var setups []func()
	values := func(k int) []string {
		v := make([]string, k)
		for i := range v {
			v[i] = "v" + strconv.Itoa(i)
		}
		return v
	}
	count := func() int {
		if r.IntN(3) == 0 {
			return big
		}
		return 1 + r.IntN(4)
	}
	for i := range n {
		key := b.direct.Key(b.ns, fmt.Sprintf("k%d-%d", r.Uint64(), i))
		d.keys = append(d.keys, key)
		var c redisstore.Command
		var wrongType func() // makes the key hold a type the command refuses
		switch r.IntN(9) {
		case 0:
			c = redisstore.Set(key, "x")
		case 1:
			c = redisstore.IncrBy(key, 1+r.Int64N(100))
			wrongType = func() { client.RPush(ctx, key, "l") }
		case 2:
			c = redisstore.HSet(key, values(2*count())...)
			wrongType = func() { client.Set(ctx, key, "s", 0) }
		case 3:
			c = redisstore.HIncrBy(key, "f", 1)
			wrongType = func() { client.SAdd(ctx, key, "m") }
		case 4:
			c = redisstore.RPush(key, values(count())...)
			wrongType = func() { client.Set(ctx, key, "s", 0) }
		case 5:
			c = redisstore.LPush(key, values(count())...)
			wrongType = func() { client.HSet(ctx, key, "f", "v") }
		case 6:
			c = redisstore.SAdd(key, values(count())...)
			wrongType = func() { client.RPush(ctx, key, "l") }
		case 7:
			c = redisstore.SRem(key, values(count())...)
			setups = append(setups, func() { client.SAdd(ctx, key, "v0", "v1", "other") })
			wrongType = func() { client.Set(ctx, key, "s", 0) }
		case 8:
			args := make([]string, 0, 2*count())
			for j := range cap(args) / 2 {
				args = append(args, strconv.Itoa(j), "m"+strconv.Itoa(j))
			}
			c = redisstore.Command{Op: redisstore.OpZAdd, Key: key, Args: args}
			wrongType = func() { client.Set(ctx, key, "s", 0) }
		}
		if i == d.fails {
			switch {
			case r.IntN(6) == 0:
				c, d.tooLong = redisstore.RPush(key, values(requestLimit)...), true
			case c.Op == redisstore.OpIncrBy && r.IntN(2) == 0:
				setups = append(setups, func() { client.Set(ctx, key, "not a number", 0) })
			case c.Op == redisstore.OpIncrBy:
				setups = append(setups, func() { client.Set(ctx, key, strconv.FormatInt(1<<53-1, 10), 0) })
			case wrongType != nil && r.IntN(3) > 0:
				setups = append(setups, wrongType)
			default:
				c = c.If(redisstore.Guard{Test: redisstore.TestEqual, Value: "never this"})
			}
		}
		d.cmds = append(d.cmds, c)
	}
	d.before = func() {
		for _, s := range setups {
			s()
		}
	}
	return d
}

// TestCompletionAllOrNone draws completions of random commands, some with
// more arguments than Lua's unpack takes, some with one command that
// cannot apply (or that makes the request longer than the store's
// limit), and completes, commits (optimistic mode) and
// batch-completes each on redis-server: after every call either the
// record is COMPLETED and every command applied, or the record is not and
// no key changed.
func TestCompletionAllOrNone(t *testing.T) {
	b := setupWith(t, 0, redisstore.WithMaxRequestArgs(requestLimit))
	client := b.direct.Client()
	r := rand.New(rand.NewPCG(1, 2))
	cases, refused, tooLong := 0, 0, 0
	for round := range 60 {
		for _, via := range []string{"complete", "commit", "batch"} {
			d := b.draw(t, r, 1+r.IntN(5), r.IntN(2) == 0)
			d.before()
			before := dump(t, client, d.keys...)
			key := fmt.Sprintf("%s-%d", via, round)
			var err error
			switch via {
			case "complete":
				_, err = b.completeWith(t, key, d.cmds...)
			case "commit":
				_, err = b.direct.Commit(t.Context(), idemstore.CommitRequest{
					Namespace: b.ns, Key: key, PayloadHash: "h", Token: fmt.Sprintf("tok%d", round),
					Now: b.at(0), Status: idemstore.StatusCompleted, ExpiresAt: b.at(3600), Writes: d.cmds,
				})
			case "batch":
				c, cerr := b.direct.Claim(t.Context(), b.claimReq(key, 0))
				if cerr != nil || !c.Claimed {
					t.Fatalf("Claim(%s) = %+v, %v", key, c, cerr)
				}
				// A neighbour in the same batch, completed with no writes.
				other, cerr := b.direct.Claim(t.Context(), b.claimReq(key+"-n", 0))
				if cerr != nil || !other.Claimed {
					t.Fatalf("Claim(%s-n) = %+v, %v", key, other, cerr)
				}
				errs := b.direct.CompleteBatch(t.Context(), []idemstore.CompleteRequest{
					{Lease: other.Lease, Now: b.at(1), ExpiresAt: b.at(3600)},
					{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600), Writes: d.cmds},
				})
				if errs[0] != nil {
					t.Errorf("%s: the neighbour's completion: %v", key, errs[0])
				}
				err = errs[1]
			}
			cases++
			if d.fails >= 0 {
				refused++
			}
			if d.tooLong {
				tooLong++
			}
			after := dump(t, client, d.keys...)
			rec, gerr := b.direct.Get(t.Context(), idemstore.GetRequest{Namespace: b.ns, Key: key, Now: b.at(2)})
			if gerr != nil && !errors.Is(gerr, idemstore.ErrNotFound) {
				t.Fatal(gerr)
			}
			completed := gerr == nil && rec.Status == idemstore.StatusCompleted
			switch {
			case d.fails >= 0 && (err == nil || completed):
				t.Errorf("%s: command %d cannot apply, yet the call returned %v and the record is completed: %v", key, d.fails, err, completed)
			case d.tooLong && !errors.Is(err, redisstore.ErrRequestTooLarge):
				t.Errorf("%s: command %d makes the request too long, yet the call returned %v", key, d.fails, err)
			case d.fails < 0 && (err != nil || !completed):
				t.Errorf("%s: every command can apply, yet the call returned %v (completed: %v)", key, err, completed)
			}
			if !completed {
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("%s: the completion did not apply (%v), yet keys changed (-before +after):\n%s", key, err, diff)
				}
				continue
			}
			checkApplied(t, key, d, after)
		}
	}
	t.Logf("%d completions drawn, %d with a command that refuses it (%d of them too long a request)", cases, refused, tooLong)
}

// checkApplied checks that each command's whole effect is in after: every
// value of a long command, not only its first part. The drawn keys are new,
// so a command adding n distinct values leaves n.
func checkApplied(t *testing.T, key string, d drawn, after map[string]any) {
	t.Helper()
	for i, c := range d.cmds {
		cmd := c.(redisstore.Command)
		var want int
		var kind string
		switch cmd.Op {
		case redisstore.OpRPush, redisstore.OpLPush:
			want, kind = len(cmd.Args), "list"
		case redisstore.OpSAdd:
			want, kind = len(cmd.Args), "set"
		case redisstore.OpHSet:
			want, kind = len(cmd.Args)/2, "hash"
		case redisstore.OpZAdd:
			want, kind = len(cmd.Args)/2, "zset"
		default:
			continue
		}
		got := -1
		switch v := after[cmd.Key+" ("+kind+")"].(type) {
		case []string:
			got = len(v)
		case map[string]string:
			got = len(v)
		case []redis.Z:
			got = len(v)
		}
		if got != want {
			t.Errorf("%s: command %d (%s of %d arguments) left %d values, want %d", key, i, cmd.Op, len(cmd.Args), got, want)
		}
	}
}
