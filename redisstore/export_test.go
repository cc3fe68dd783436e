package redisstore

// OwnRequestArgs exposes the bound AddCompletionWrite counts for the
// arguments of a completion's request that are not its commands'.
const OwnRequestArgs = ownRequestArgs

// WithMaxRequestBytes lowers the store's limit on a request's bytes
// (MaxRequestBytes), so a test reaches it without half a gigabyte.
func WithMaxRequestBytes(n int) Option {
	return func(s *Store) { s.maxBytes = n }
}
