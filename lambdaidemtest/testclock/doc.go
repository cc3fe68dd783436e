// Package testclock is a settable clock for tests that steer the
// decorator's time (lambdaidem.WithClock) against a real store: time moves
// only when the test moves it, and every timer armed on the clock (a
// handler's deadline, a heartbeat's tick, a store retry's wait) fires when
// the clock reaches it, on the goroutine that moved it.
//
//	clk := testclock.New(time.Now())
//	h := lambdaidem.SQS(store, handler, lambdaidem.WithClock(clk))
//	clk.Advance(time.Minute) // fires what falls due
package testclock
