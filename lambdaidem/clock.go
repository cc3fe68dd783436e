package lambdaidem

import "time"

// Timer is a timer a Clock armed; *time.Timer is one.
type Timer = interface{ Stop() bool }

// Clock is the time the decorator measures everything with: see WithClock.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// AfterFunc calls f once d of the clock's time has passed, unless the
	// returned Timer is stopped first. It must never call f before it
	// returns, nor on the goroutine that called it: on a goroutine of its
	// own, as time.AfterFunc does, or on the one that moves a test
	// clock's time.
	AfterFunc(d time.Duration, f func()) Timer
}
