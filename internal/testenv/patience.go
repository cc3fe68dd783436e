package testenv

import (
	"context"
	"testing"
	"time"
)

// Patience bounds a test's wait for something the machine does when it
// gets round to it: a message to arrive, a process to start, a lease to be
// extended, an invocation to end. On a quiet machine such waits take
// milliseconds; at a load average of 10 or more on two cores, seconds. It
// is a deadline for a hang, never an expectation: a test that passes only
// when something happens within a shorter time is a flaky test.
const Patience = 5 * time.Minute

// Context returns a context for a test's requests to the local services.
// It ends a little before the test binary's own deadline (go test
// -timeout), so that a request the service never answers fails its test
// with the test's name instead of stopping the whole binary with a stack
// dump; without a deadline it ends after Patience. It is t.Context's child:
// it ends, too, just before the test's cleanups run.
func Context(t testing.TB) context.Context {
	t.Helper()
	bound := time.Now().Add(Patience)
	if d, ok := deadline(t); ok {
		// The margin leaves time to report and to run the cleanups.
		bound = d.Add(-min(time.Minute, time.Until(d)/10))
	}
	ctx, cancel := context.WithDeadline(t.Context(), bound)
	t.Cleanup(cancel)
	return ctx
}

func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// WaitFor polls cond, for state that another goroutine, process or service
// changes, until it holds; it fails the test, naming what it waited for,
// if that takes longer than Patience. A poll interval is not
// synchronization: cond decides.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Since(start) > Patience {
			t.Fatalf("waited %s for %s", Patience, what)
		}
		time.Sleep(wait)
	}
}
