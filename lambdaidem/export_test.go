package lambdaidem

import "time"

// WithTestTicker drives the heartbeat from ticks instead of a real ticker.
func WithTestTicker(ticks <-chan time.Time) Option {
	return func(c *config) {
		c.ticker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	}
}
