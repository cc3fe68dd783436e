package sim

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Options steer an exploration.
type Options struct {
	// Budget is how long to explore (wall time).
	Budget time.Duration
	// Seed is the first scenario's seed; scenario i uses Seed+i.
	Seed uint64
	// Max stops after this many scenarios (0: budget only).
	Max int
	// Known turns on generator knobs that reach known bugs (see Known).
	Known []string
	// Filter forces options (see Draw).
	Filter string
	// Store, when set, makes a fresh store per scenario (the in-memory
	// store when nil).
	Store func() idemstore.Store
	// Shrink shrinks the first failure before reporting it.
	Shrink bool
	// Workers is how many scenarios run at once, each in its own world
	// (0: GOMAXPROCS).
	Workers int
	// Spent, when set, measures what Budget bounds (the process's CPU
	// time, say, which a loaded machine does not shrink as it does wall
	// time); nil: wall time since the start.
	Spent func() time.Duration
}

// Stats sums an exploration.
type Stats struct {
	Scenarios, Messages, Invocations int
	SimTime                          time.Duration
	Elapsed                          time.Duration
	// Elapsed (wall time) and Spent (what Options.Spent measures, wall
	// time without it) run up to the first failure, before it is shrunk.
	Spent time.Duration
	// Batched counts the scenarios that built a decorator with batched
	// writes, Batches the batched requests they sent.
	Batched, Batches int
	// Failure is the first failing scenario (shrunk when asked), or nil.
	Failure *Result
	// Original is the failing scenario before shrinking.
	Original *Result
	// Known and Filter are the options the scenarios were drawn with; a
	// replay needs them.
	Known  []string
	Filter string
}

// Explore runs scenarios with consecutive seeds, several at once, until
// the budget is spent or one fails.
func Explore(o Options) Stats {
	st := Stats{Known: o.Known, Filter: o.Filter}
	start := time.Now()
	spent := o.Spent
	if spent == nil {
		spent = func() time.Duration { return time.Since(start) }
	} else {
		base := spent()
		measure := spent
		spent = func() time.Duration { return measure() - base }
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Each worker runs whole scenarios, each in a world of its own: a
	// scenario depends on its seed alone, whichever worker runs it.
	var (
		mu     sync.Mutex
		next   uint64
		done   bool
		failed *Config
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if done || o.Max > 0 && next >= uint64(o.Max) || o.Max == 0 && spent() >= o.Budget {
					done = true
					mu.Unlock()
					return
				}
				seed := o.Seed + next
				next++
				mu.Unlock()
				cfg := Draw(seed, o.Known, o.Filter)
				res := Run(seed, cfg, newStore(o.Store), false)
				mu.Lock()
				st.Scenarios++
				st.Messages += res.Messages
				st.Invocations += res.Invocation
				st.SimTime += res.SimTime
				if res.Batched > 0 {
					st.Batched++
				}
				st.Batches += res.Batches
				if res.Failed() && st.Failure == nil {
					st.Original, st.Failure, failed = res, res, &cfg
					st.Elapsed, st.Spent = time.Since(start), spent()
					done = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if st.Failure == nil {
		st.Elapsed, st.Spent = time.Since(start), spent()
	} else if o.Shrink {
		st.Failure = Shrink(st.Original.Seed, *failed, o.Store)
	}
	return st
}

func newStore(f func() idemstore.Store) idemstore.Store {
	if f == nil {
		return nil
	}
	return f()
}

// Shrink makes a failing scenario smaller while it still fails (fewer
// messages, keys and pollers; faults, operators and options turned off
// one at a time) and returns the smallest failing run, traced.
func Shrink(seed uint64, cfg Config, store func() idemstore.Store) *Result {
	fails := func(c Config) bool { return Run(seed, c, newStore(store), false).Failed() }
	return Run(seed, Minimize(cfg, fails, false), newStore(store), true)
}

// Minimize makes cfg smaller while fails holds: it tries each shrinking
// step in turn, keeps a step's world when that world still fails, and
// goes round again until no step applies. With worldOnly it shrinks only
// what the world does to the handler (messages, pollers, faults,
// operators), never the handler's options: the test kit's explorer runs
// the user's handler with the user's options.
func Minimize(cfg Config, fails func(Config) bool, worldOnly bool) Config {
	steps := worldSteps
	if !worldOnly {
		steps = append(append([]func(*Config) bool{}, worldSteps...), optionSteps...)
	}
	for changed := true; changed; {
		changed = false
		for _, step := range steps {
			for {
				c := cfg
				if !step(&c) || !fails(c) {
					break
				}
				cfg, changed = c, true
			}
		}
	}
	return cfg
}

// worldSteps shrink what the world does to a handler.
var worldSteps = []func(c *Config) bool{
	func(c *Config) bool { return halve(&c.Messages) },
	func(c *Config) bool { return halve(&c.Pollers) },
	func(c *Config) bool { return halve(&c.BatchSize) },
	func(c *Config) bool { return zero(&c.ProducerDup) },
	func(c *Config) bool { return zero(&c.SQSDup) },
	func(c *Config) bool { return zero(&c.Slow) },
	func(c *Config) bool { return zero(&c.Kill) },
	func(c *Config) bool { return zero(&c.SinkFail) },
	func(c *Config) bool { return zero(&c.Store.ErrBefore) },
	func(c *Config) bool { return zero(&c.Store.LostAfter) },
	func(c *Config) bool { return zero(&c.Store.Throttle) },
	func(c *Config) bool { return zero(&c.Store.Late) },
	func(c *Config) bool { return zero(&c.Store.MarkErr) },
	func(c *Config) bool { return zeroDur(&c.Store.Latency) },
	func(c *Config) bool { return zeroDur(&c.Store.OutageFor) },
	func(c *Config) bool { return zero(&c.ForceOps) },
	func(c *Config) bool { return zeroInt(&c.Forget) },
	func(c *Config) bool { return halve(&c.Redrive) },
	func(c *Config) bool { return zeroInt(&c.Redrive) },
	func(c *Config) bool { return zero(&c.RedriveSendFail) },
	func(c *Config) bool { return zero(&c.RedriveDelFail) },
	func(c *Config) bool { return zero(&c.RedriveUncertain) },
	func(c *Config) bool { return halve(&c.Resolve) },
	func(c *Config) bool { return zeroInt(&c.Resolve) },
	func(c *Config) bool { return zero(&c.Abandon) },
	func(c *Config) bool { return zeroInt(&c.MaxReceive) },
	func(c *Config) bool { return zeroDur(&c.Lease) },
	func(c *Config) bool { return zeroDur(&c.SendOver) },
	func(c *Config) bool { return zero(&c.LostAnswer) },
	func(c *Config) bool { return zero(&c.Twice) },
	func(c *Config) bool { return zero(&c.SharedGroups) },
	func(c *Config) bool { return zero(&c.LargeBody) },
	func(c *Config) bool { return zero(&c.ReqRepeat) },
	func(c *Config) bool { return zero(&c.ReqConflict) },
	func(c *Config) bool { return zero(&c.BadKeys) },
	func(c *Config) bool { return zeroInt(&c.Inspect) },
	func(c *Config) bool { return off(&c.KeyForms) },
	func(c *Config) bool { return zero(&c.Panics) },
	func(c *Config) bool { return off(&c.Logs) },
	func(c *Config) bool { return zero(&c.Fail503) },
	func(c *Config) bool { return off(&c.REST) },
	func(c *Config) bool { return off(&c.AuthCaller) },
	func(c *Config) bool { return off(&c.HTTPOptions) },
	func(c *Config) bool { return off(&c.KeyOptional) },
}

// optionSteps shrink the simulator's own handlers: their keys, their
// options and the kinds of message they get.
var optionSteps = []func(c *Config) bool{
	func(c *Config) bool { return halve(&c.Keys) },
	func(c *Config) bool { return halve(&c.Concurrency) },
	func(c *Config) bool { return zero(&c.Conflict) },
	func(c *Config) bool { return zero(&c.Poison) },
	func(c *Config) bool { return zero(&c.FailN) },
	func(c *Config) bool { return zero(&c.ErrAfter) },
	func(c *Config) bool { return zero(&c.Unknown) },
	func(c *Config) bool { return zero(&c.NotApplied) },
	func(c *Config) bool { return zero(&c.TxRefuse) },
	func(c *Config) bool { return zero(&c.BadKey) },
	func(c *Config) bool { return zero(&c.AbandonCopy) },
	func(c *Config) bool { return zeroDur(&c.Cache) },
	func(c *Config) bool { return zeroDur(&c.Heartbeat) },
	func(c *Config) bool { return off(&c.Backoff) },
	func(c *Config) bool { return off(&c.Visibility2) },
	func(c *Config) bool { return off(&c.FIFO) },
	func(c *Config) bool { return zero(&c.Twins) },
	func(c *Config) bool { return zero(&c.LateFail) },
	func(c *Config) bool { return zeroDur(&c.Wait) },
	func(c *Config) bool { return off(&c.Observe) },
	func(c *Config) bool { return halve(&c.Requests) },
	func(c *Config) bool { return zeroInt(&c.Requests) },
	func(c *Config) bool { return zeroInt(&c.Callers) },
	func(c *Config) bool { return off(&c.HTTP) },
	func(c *Config) bool { return off(&c.HashFields) },
	func(c *Config) bool { return off(&c.NoAllFailedError) },
	func(c *Config) bool { return zeroDur(&c.UnfinishedRet) },
	func(c *Config) bool { return zeroDur(&c.Retention) },
	func(c *Config) bool { return zeroDur(&c.ResultRet) },
	func(c *Config) bool { return zero(&c.Optimistic) },
	func(c *Config) bool { return zero(&c.Batched) },
	func(c *Config) bool { return off(&c.Tx) },
	func(c *Config) bool { return off(&c.AtMostOnce) },
	func(c *Config) bool { return off(&c.FailOnAny) },
	func(c *Config) bool {
		if c.KeyBy == "" {
			return false
		}
		c.KeyBy = ""
		return true
	},
}

func halve(n *int) bool {
	if *n <= 1 {
		return false
	}
	*n /= 2
	return true
}

func zero(f *float64) bool {
	if *f == 0 {
		return false
	}
	*f = 0
	return true
}

func zeroDur(d *time.Duration) bool {
	if *d == 0 {
		return false
	}
	*d = 0
	return true
}

func zeroInt(n *int) bool {
	if *n == 0 {
		return false
	}
	*n = 0
	return true
}

func off(b *bool) bool {
	if !*b {
		return false
	}
	*b = false
	return true
}

// Report describes a failure: the seed, the violations, how to replay it,
// and the shrunk trace.
func (st Stats) Report() string {
	f := st.Failure
	if f == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "simulation failed: seed %d\n", st.Original.Seed)
	for _, v := range st.Original.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	known := strings.Join(st.Known, ",")
	fmt.Fprintf(&b, "replay: make sim SEED=%d SIM_CONFIG=%s KNOWN=%s   (go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.config=%s -sim.known=%s)\n",
		f.Seed, st.Filter, known, f.Seed, st.Filter, known)
	if f != st.Original {
		fmt.Fprintf(&b, "shrunk to %d messages; replay the shrunk scenario with:\n  go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'\n", f.Config.Messages, f.Seed, f.Config)
		for _, v := range f.Violations {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	fmt.Fprintf(&b, "trace:\n%s", f.Trace)
	return b.String()
}
