package memstore

import "github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"

var _ idemstore.Capable = (*Store)(nil)

// Capabilities declares what the in-memory store can do: the completion
// writes of the WriteApplier given with WithCompletionWrites (none
// without one, so a handler built with lambdaidem.WithCompletionWrites is
// refused when it is built), results of any size, any namespace the
// decorator accepts.
func (s *Store) Capabilities() idemstore.Capabilities {
	c := idemstore.Capabilities{Store: "in-memory"}
	if s.writes != nil {
		c.CompletionWrites = s.writes.WriteTypes()
	}
	return c
}
