package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Effects is how the completion-write cases make a store's writes and
// read their effect back: the writes the handler would add with
// lambdaidem.AddCompletionWrite, in the store's own type.
type Effects struct {
	// Insert returns a write that stores value under name in namespace,
	// with a condition of its own that refuses it when name already holds
	// a value (for DynamoDB a Put conditioned on attribute_not_exists, for
	// Redis a SetNX).
	Insert func(namespace, name, value string) any
	// Read returns the value stored under name in namespace, "" when
	// none.
	Read func(ctx context.Context, namespace, name string) (string, error)
}

// RunCompletionWrites runs the cases every store that commits completion
// writes (idemstore.CompleteRequest.Writes) must pass, with the stores
// newStore returns and their writes made by e:
//
//   - The writes apply with the completion, and only with it.
//   - A write whose own condition fails refuses the whole completion with
//     an error matching idemstore.ErrWriteRefused: no write applies, the
//     record is unchanged and still completes without the writes.
//   - A holder whose lease was taken over, or whose record expired, gets
//     idemstore.ErrLeaseLost and none of its writes applies.
//   - A completion re-sent after it applied (its reply lost) is a success
//     and applies nothing again.
//   - A store that declares its idemstore.Capabilities lists the writes'
//     type.
func RunCompletionWrites(t *testing.T, newStore func(t *testing.T) idemstore.Store, e Effects) {
	t.Helper()
	for _, c := range writeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &writesFixture{fixture: setup(t, newStore), e: e})
		})
	}
}

type writesFixture struct {
	*fixture
	e Effects
}

var writeCases = []struct {
	name string
	run  func(t *testing.T, f *writesFixture)
}{
	{"WritesCommitWithCompletion", testWritesCommitWithCompletion},
	{"WriteRefusedRecordsNothing", testWriteRefusedRecordsNothing},
	{"StaleHolderWritesNothing", testStaleHolderWritesNothing},
	{"ExpiredRecordWritesNothing", testExpiredRecordWritesNothing},
	{"RetriedCompletionWritesOnce", testRetriedCompletionWritesOnce},
	{"CapabilitiesListTheWrites", testCapabilitiesListTheWrites},
}

// completeWith completes l at second now with writes.
func (f *writesFixture) completeWith(l idemstore.Lease, now int, writes ...any) error {
	return f.store.Complete(f.ctx, idemstore.CompleteRequest{
		Lease:     l,
		Now:       f.at(now),
		Result:    []byte(`"done"`),
		ExpiresAt: f.at(now + retentionSecs),
		Writes:    writes,
	})
}

// effect reads what name holds, failing the test on an error.
func (f *writesFixture) effect(name string) string {
	f.t.Helper()
	v, err := f.e.Read(f.ctx, f.ns, name)
	if err != nil {
		f.t.Fatalf("read effect %s: %v", name, err)
	}
	return v
}

// wantEffects fails the test unless each name holds its value ("" none).
func (f *writesFixture) wantEffects(what string, want map[string]string) {
	f.t.Helper()
	for name, v := range want {
		if got := f.effect(name); got != v {
			f.t.Errorf("%s: effect %s = %q, want %q", what, name, got, v)
		}
	}
}

func testWritesCommitWithCompletion(t *testing.T, f *writesFixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.wantEffects("before the completion", map[string]string{"a": "", "b": ""})
	f.ok("Complete with writes", f.completeWith(c.Lease, 1, f.e.Insert(f.ns, "a", "1"), f.e.Insert(f.ns, "b", "2")))
	f.wantEffects("after the completion", map[string]string{"a": "1", "b": "2"})
	if r := f.get("k", f.at(1)); r.Status != idemstore.StatusCompleted || r.LeaseToken != c.Lease.Token {
		t.Errorf("record after the completion: %s under %q, want COMPLETED under the lease's token", r.Status, r.LeaseToken)
	}
}

func testWriteRefusedRecordsNothing(t *testing.T, f *writesFixture) {
	first := f.mustClaim(f.claimReq("first", 0))
	f.ok("Complete of the first key", f.completeWith(first.Lease, 1, f.e.Insert(f.ns, "taken", "first")))

	c := f.mustClaim(f.claimReq("k", 2))
	err := f.completeWith(c.Lease, 3, f.e.Insert(f.ns, "fresh", "k"), f.e.Insert(f.ns, "taken", "k"))
	if !errors.Is(err, idemstore.ErrWriteRefused) {
		t.Fatalf("Complete with a write whose condition fails = %v, want ErrWriteRefused", err)
	}
	if errors.Is(err, idemstore.ErrLeaseLost) || errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Errorf("refused completion = %v: a refusal is neither a lost lease nor an unavailable store", err)
	}
	f.wantEffects("after the refused completion", map[string]string{"fresh": "", "taken": "first"})
	f.unchanged("the refused completion", c.Record, f.at(3))
	// Nothing was recorded: the lease still completes, and can still
	// write.
	f.ok("Complete after the refusal", f.completeWith(c.Lease, 4, f.e.Insert(f.ns, "fresh", "k")))
	f.wantEffects("after the completion", map[string]string{"fresh": "k"})
}

func testStaleHolderWritesNothing(t *testing.T, f *writesFixture) {
	old := f.mustClaim(f.claimReq("k", 0))
	later := leaseSecs + graceSecs + 1
	f.mustClaim(f.claimReq("k", later))
	f.leaseLost("the old holder's Complete with writes", f.completeWith(old.Lease, later+1, f.e.Insert(f.ns, "x", "old")))
	f.wantEffects("after the old holder's completion", map[string]string{"x": ""})
}

func testExpiredRecordWritesNothing(t *testing.T, f *writesFixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.leaseLost("Complete with writes after the record expired", f.completeWith(c.Lease, retentionSecs+1, f.e.Insert(f.ns, "x", "late")))
	f.wantEffects("after the expired completion", map[string]string{"x": ""})
}

func testRetriedCompletionWritesOnce(t *testing.T, f *writesFixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	write := f.e.Insert(f.ns, "x", "once")
	f.ok("Complete with writes", f.completeWith(c.Lease, 1, write))
	// The same request again, as a client re-sends one whose reply was
	// lost: its insert would be refused now, so a success shows the
	// store recognised the completion as its own and applied nothing.
	f.ok("the same Complete re-sent", f.completeWith(c.Lease, 1, write))
	f.ok("the same Complete re-sent later", f.completeWith(c.Lease, 2, write))
	f.wantEffects("after the re-sent completions", map[string]string{"x": "once"})
}

func testCapabilitiesListTheWrites(t *testing.T, f *writesFixture) {
	caps, ok := idemstore.CapabilitiesOf(f.store)
	if !ok {
		t.Skip("the store declares no capabilities")
	}
	if w := f.e.Insert(f.ns, "x", "v"); !caps.CommitsWrite(reflect.TypeOf(w)) {
		t.Errorf("the store commits %T but its Capabilities list %v", w, caps.CompletionWrites)
	}
}
