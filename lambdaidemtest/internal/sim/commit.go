package sim

import (
	"context"
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The optimistic mode (lambdaidem.WithOptimisticCommit) through the
// simulated stores: a commit meets the same faults as any write, and the
// checker sees the record it met.

var (
	_ idemstore.Committer = (*FaultStore)(nil)
	_ idemstore.Committer = (*TxStore)(nil)
)

// committer returns the store's idemstore.Committer, or an error saying
// it has none.
func committer(s idemstore.Store) (idemstore.Committer, error) {
	c, ok := s.(idemstore.Committer)
	if !ok {
		return nil, fmt.Errorf("sim: %T: %w", s, lambdaidem.ErrCommitUnsupported)
	}
	return c, nil
}

// Commit implements idemstore.Committer when the store it wraps does.
// OnCommit sees every commit that reached the store, with the record it
// met (read in the same step: the world does not run between the two).
func (s *FaultStore) Commit(ctx context.Context, req idemstore.CommitRequest) (res idemstore.CommitResult, err error) {
	c, err := committer(s.Store)
	if err != nil {
		return idemstore.CommitResult{}, err
	}
	var aerr error
	ferr := s.call("commit", true, func() {
		ctx := context.WithoutCancel(ctx)
		before, berr := s.Store.Get(ctx, idemstore.GetRequest{Namespace: req.Namespace, Key: req.Key, Now: req.Now})
		res, aerr = c.Commit(ctx, req)
		if aerr == nil && s.OnCommit != nil {
			s.OnCommit(req, res, before, berr)
		}
	})
	if ferr != nil {
		return idemstore.CommitResult{}, ferr
	}
	return res, aerr
}

// Commit implements idemstore.Committer when the store it wraps does:
// the Effects of a COMPLETED commit apply to the ledger in the same step
// as the commit, once per commit token, only when it applied.
func (s *TxStore) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	c, err := committer(s.Store)
	if err != nil {
		return idemstore.CommitResult{}, err
	}
	fx, rest := effectsOf(req.Writes)
	req.Writes = rest
	if len(fx) > 0 && !s.Ledger.tokens[req.Token] && s.Refuse != nil && s.Refuse() {
		return idemstore.CommitResult{}, fmt.Errorf("sim: effect's condition failed: %w", idemstore.ErrWriteRefused)
	}
	res, err := c.Commit(ctx, req)
	if err != nil || !res.Committed {
		return res, err
	}
	if len(fx) > 0 && !s.Ledger.tokens[req.Token] {
		s.Ledger.tokens[req.Token] = true
		for _, e := range fx {
			s.Ledger.Tx[e.Key] = append(s.Ledger.Tx[e.Key], e.By)
		}
	}
	return res, nil
}
