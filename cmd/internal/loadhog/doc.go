// Command loadhog keeps the machine's load average up while it runs the
// project's checks, so that a test that only passes on a quiet machine
// fails here instead of in CI. `make test-load` runs it:
//
//	go run ./cmd/internal/loadhog -load 8 -runs 5 -step 'test=make test' -step 'demo=make demo'
//
// It starts -spinners busy goroutines (default: the target load plus two)
// on as many threads, so that at least that many threads are runnable at
// every moment, and waits until the one-minute load average in
// /proc/loadavg reaches -load (at most -warmup). Then it runs the steps in
// order, -runs times, each with `bash -c`, its output in a log file of its
// own under -logs. For each step it prints the load average at its start
// and end and the lowest it sampled in between, and fails when that fell
// below -load: a run that was not under load does not count. It stops at
// the first step that fails, prints the end of its log and keeps the logs.
//
// The spinners live in loadhog's own process, so they stop with it,
// however it ends. Ctrl-C (SIGINT) or SIGTERM is passed on to the step
// running, whose stack stops its services; loadhog then exits. A step gets
// SIGTERM if loadhog dies without passing it on.
//
// Without -step it only spins, printing the load average every -every,
// until interrupted: load the machine while running something by hand.
package main
