package storetest

import (
	"errors"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The optimistic mode's commits with completion writes run in
// RunCompletionWrites, for stores that implement idemstore.Committer:
//
//   - The writes apply with a commit that applies, and only with it.
//   - A write whose own condition fails refuses the commit with an error
//     matching idemstore.ErrWriteRefused, and nothing is recorded.
//   - A commit refused by the record (a live lease, a completed key, a
//     key conflict) applies none of its writes.
//   - A commit re-sent after it applied (its reply lost) is its own and
//     applies nothing again.
func init() {
	writeCases = append(writeCases,
		struct {
			name string
			run  func(t *testing.T, f *writesFixture)
		}{"CommitWritesApplyWithCommit", testCommitWritesApply},
		struct {
			name string
			run  func(t *testing.T, f *writesFixture)
		}{"CommitWriteRefusedRecordsNothing", testCommitWriteRefused},
		struct {
			name string
			run  func(t *testing.T, f *writesFixture)
		}{"RefusedCommitWritesNothing", testRefusedCommitWritesNothing},
		struct {
			name string
			run  func(t *testing.T, f *writesFixture)
		}{"RetriedCommitWritesOnce", testRetriedCommitWritesOnce},
	)
}

func testCommitWritesApply(t *testing.T, f *writesFixture) {
	req := f.commitReq("k", 0, idemstore.StatusCompleted)
	req.Writes = []any{f.e.Insert(f.ns, "a", "1"), f.e.Insert(f.ns, "b", "2")}
	f.wantEffects("before the commit", map[string]string{"a": "", "b": ""})
	res := f.mustCommit(req)
	f.wantEffects("after the commit", map[string]string{"a": "1", "b": "2"})
	if res.Record.Status != idemstore.StatusCompleted || res.Record.LeaseToken != req.Token {
		t.Errorf("record after the commit: %s under %q, want COMPLETED under the commit's token", res.Record.Status, res.Record.LeaseToken)
	}
}

func testCommitWriteRefused(t *testing.T, f *writesFixture) {
	first := f.commitReq("first", 0, idemstore.StatusCompleted)
	first.Writes = []any{f.e.Insert(f.ns, "taken", "first")}
	f.mustCommit(first)

	req := f.commitReq("k", 1, idemstore.StatusCompleted)
	req.Writes = []any{f.e.Insert(f.ns, "fresh", "k"), f.e.Insert(f.ns, "taken", "k")}
	res, err := f.committer().Commit(f.ctx, req)
	if !errors.Is(err, idemstore.ErrWriteRefused) {
		t.Fatalf("Commit with a write whose condition fails = %+v, %v; want ErrWriteRefused", res, err)
	}
	if errors.Is(err, idemstore.ErrStoreUnavailable) || res.Committed {
		t.Errorf("refused commit = %+v, %v: a refusal is neither a commit nor an unavailable store", res, err)
	}
	f.wantEffects("after the refused commit", map[string]string{"fresh": "", "taken": "first"})
	f.mustBeAbsent("k", req.Now)
	// Nothing was recorded: the key still commits.
	req.Token, req.Writes = newToken(), []any{f.e.Insert(f.ns, "fresh", "k")}
	f.mustCommit(req)
	f.wantEffects("after the commit", map[string]string{"fresh": "k"})
}

func testRefusedCommitWritesNothing(t *testing.T, f *writesFixture) {
	// A live lease of a consumer in lease mode.
	f.mustClaim(f.claimReq("leased", 0))
	req := f.commitReq("leased", 1, idemstore.StatusCompleted)
	req.Writes = []any{f.e.Insert(f.ns, "x", "over a lease")}
	f.mustRefuseCommit(req)
	// A key completed by the same payload: a duplicate.
	done := f.commitReq("done", 0, idemstore.StatusCompleted)
	f.mustCommit(done)
	req = f.commitReq("done", 1, idemstore.StatusCompleted)
	req.Writes = []any{f.e.Insert(f.ns, "y", "duplicate")}
	f.mustRefuseCommit(req)
	// Another payload: a key conflict.
	other := f.commitReq("conflict", 0, idemstore.StatusFailed)
	f.mustCommit(other)
	req = f.commitReq("conflict", 1, idemstore.StatusCompleted)
	req.PayloadHash = hashB
	req.Writes = []any{f.e.Insert(f.ns, "z", "conflict")}
	f.mustRefuseCommit(req)
	f.wantEffects("after the refused commits", map[string]string{"x": "", "y": "", "z": ""})
}

func testRetriedCommitWritesOnce(t *testing.T, f *writesFixture) {
	req := f.commitReq("k", 0, idemstore.StatusCompleted)
	req.Writes = []any{f.e.Insert(f.ns, "x", "once")}
	f.mustCommit(req)
	// The same request again, as a client re-sends one whose reply was
	// lost: its insert would be refused now, so a commit shows the store
	// recognised it as its own and applied nothing.
	if res := f.commit(req); !res.Committed {
		t.Errorf("the re-sent commit = %+v, want its own", res)
	}
	f.wantEffects("after the re-sent commit", map[string]string{"x": "once"})
}
