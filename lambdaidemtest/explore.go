package lambdaidemtest

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
)

// Exploration runs a handler through many seeded random scenarios: the
// simulation's generator draws, per seed, what SQS, Lambda and the store do
// to your messages (batch sizes, concurrent environments, function timeout
// and visibility timeout, the queue's redrive policy, send times, producer
// duplicates, SQS's own duplicate deliveries, store errors, throttling,
// latency, lost answers and outages, instances that pause or crash at any
// step, failed dead-letter sends, effects whose answer is lost after they
// happened: Effect returns ErrAnswerLost to your fake) and what an
// operator does meanwhile (Operators), while what you control stays
// yours: your handler, your options, your messages. (Some scenarios
// shorten the lease below the function's timeout, as a heartbeat-kept
// lease is, so a paused instance can outlive it.) After each scenario it
// checks your invariant over your effects, and the library's own promises
// (Kit.Check), which hold every effect your fakes recorded with Effect to
// what the decorator's mode allows. A failure is shrunk as the library's
// simulation shrinks its own: fewer messages, fewer environments, smaller
// batches, and faults, duplicates and operator actions turned off one at
// a time, as long as it still fails.
type Exploration struct {
	// Setup builds one scenario's handler over fresh fakes, and the
	// invariant that reads them (nil error: it holds). Called once per
	// scenario. Required.
	Setup func() (handler lambdaidem.MessageHandler, invariant func() error)
	// Options are the decorator options you deploy with.
	Options []lambdaidem.Option
	// Messages are the bodies the producer sends, each once per scenario,
	// in this order at moments the scenario draws (plus the duplicates it
	// draws). Required.
	Messages []string
	// GroupOf, when set, sends every message to a FIFO queue in the message
	// group it returns for the body.
	GroupOf func(body string) string
	// Scenarios is how many seeds to run (default 1000).
	Scenarios int
	// Seed is the first seed; scenario i runs seed Seed+i. A failure
	// prints its seed: set Seed to it and Scenarios to 1 to replay it.
	Seed uint64
	// Store, when set, is called once per scenario, after Setup, for the
	// store the scenario runs on (default: memstore.New(), which commits
	// no completion writes). For a transactional handler, return
	// memstore.New(memstore.WithCompletionWrites(db)) with the
	// dynamotest.DB that Setup just made for the handler and its
	// invariant. A real store works too: each scenario gets a namespace of
	// its own. The operators act through the store: releases and forgets
	// need a idemstore.Admin, redrives a idemstore.DeadLetterResetter,
	// and are skipped on a store without one.
	Store func() lambdaidem.Store
	// Expect, when set, declares on each scenario's kit what the test
	// means to happen (ExpectDeadLetter, ExpectFailure,
	// ExpectUnfinished): the explorer reports whatever else a scenario
	// dead-letters, fails or leaves unfinished, as Kit.Check does. It
	// accepts by itself what the world it draws causes to a handler that
	// never failed but for answers the world lost (ErrAnswerLost):
	// max_attempts (or outcome_unknown) copies after crashed or timed-out
	// attempts or lost answers (and key_already_dead_lettered copies of
	// the key's later messages), and messages moved by the queue's
	// redrive policy.
	Expect func(k *Kit)
	// Operators are the operator actions scenarios draw, at random
	// moments (nil: DefaultOperators).
	Operators *Operators
	// World, with Seed and Scenarios 1, replays the shrunk world a
	// Failure printed (Failure.Shrunk) instead of the one the seed draws.
	World string

	// observe, when set, sees each scenario's kit after its run (tests).
	observe func(*Kit)
	ns      *namespaces
}

// namespaces gives each scenario on a user's store a namespace of its own.
type namespaces struct {
	run string
	n   int
}

func (n *namespaces) next(seed uint64) string {
	n.n++
	return fmt.Sprintf("lambdaidemtest-%s-%d-%d", n.run, seed, n.n)
}

// Operators are what an operator may do while a scenario runs, as the
// CLI and sqsqueue.Redrive do it.
type Operators struct {
	// Redrive sends the dead-letter queue's copies back to their queue
	// (sqsqueue.Redrive with the store's conditional reset), which runs
	// them again. As the CLI's redrive, it leaves outcome_unknown copies
	// in the queue: their effect may have happened.
	Redrive bool
	// Release releases abandoned leases (IN_PROGRESS, the lease over), so
	// the next delivery runs at once instead of after the grace.
	Release bool
	// Forget deletes records whose lease is not valid: the key's next
	// message runs again, even after it completed.
	Forget bool
	// Force forgets and releases with --force: a lease still valid is
	// revoked, its holder's outcome refused, and the key runs again while
	// the holder may still run (until its heartbeat learns of it).
	Force bool
}

// DefaultOperators release abandoned leases and redrive the dead-letter
// queue: what an operator does without deciding to run finished work
// again. Their redrive leaves an at-most-once handler's outcome_unknown
// copies in the queue, as sqsqueue.Redrive and the CLI do unless asked
// for them by name. (For an at-most-once handler a release is such a
// decision, as the CLI's release says: the released key runs where it
// would have been dead-lettered as outcome_unknown. Explore one with
// Operators{Redrive: true} to leave releases out.)
var DefaultOperators = Operators{Redrive: true, Release: true}

// Failure is a scenario in which an invariant did not hold.
type Failure struct {
	Seed uint64
	// Problems are what broke: your invariant's error, and the library's.
	Problems []string
	// World is what the seed drew (queue, function, faults).
	World string
	// Trace is what happened, line by line, in simulated time, in the
	// shrunk world.
	Trace string
	// Shrunk is the smallest world found that still fails, for
	// Exploration.World ("" when shrinking found nothing smaller).
	Shrunk string
}

// Error describes the failure: the seed, how to replay it, what broke,
// and the trace.
func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lambdaidemtest: invariant broken in scenario seed %d\n", f.Seed)
	for _, p := range f.Problems {
		fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(p, "\n", "\n  "))
	}
	fmt.Fprintf(&b, "replay it alone with Exploration{Seed: %d, Scenarios: 1, ...}\n", f.Seed)
	if f.Shrunk != "" {
		fmt.Fprintf(&b, "shrunk; replay the smallest world that still fails with Exploration{Seed: %d, Scenarios: 1, World: %q, ...}\n", f.Seed, f.Shrunk)
	}
	fmt.Fprintf(&b, "world: %s\ntrace:\n%s", f.World, f.Trace)
	return b.String()
}

// Explore runs x and fails t with the first failure's seed and trace.
func Explore(t testing.TB, x Exploration) {
	t.Helper()
	if f := x.Search(); f != nil {
		t.Fatal(f.Error())
	}
}

// Search runs x's scenarios and returns the first failure, shrunk and
// replayed with its trace, or nil when every scenario held.
func (x Exploration) Search() *Failure {
	if x.Setup == nil || len(x.Messages) == 0 {
		panic("lambdaidemtest: an Exploration needs Setup and Messages")
	}
	n := x.Scenarios
	if n <= 0 {
		n = 1000
	}
	x.ns = &namespaces{run: rand.Text()[:8]}
	for i := range n {
		seed := x.Seed + uint64(i)
		c, err := x.world(seed)
		if err != nil {
			return &Failure{Seed: seed, Problems: []string{err.Error()}}
		}
		if probs := x.scenario(seed, c, false); probs != nil {
			return x.shrink(seed, c)
		}
	}
	return nil
}

// world is what seed draws, or the world x.World names.
func (x Exploration) world(seed uint64) (sim.Config, error) {
	c := sim.Draw(seed, nil, "")
	c.Messages = len(x.Messages)
	ops := DefaultOperators
	if x.Operators != nil {
		ops = *x.Operators
	}
	if !ops.Redrive {
		c.Redrive = 0
	}
	if !ops.Release && !ops.Forget && !ops.Force {
		c.Forget = 0
	}
	if !ops.Force {
		c.ForceOps = 0
	}
	c.Known = nil
	if x.World != "" {
		w, err := sim.ParseConfig(x.World)
		if err != nil {
			return c, fmt.Errorf("lambdaidemtest: Exploration.World: %w", err)
		}
		c = w
	}
	return c, nil
}

// shrink makes a failing world smaller while it still fails, and returns
// the smallest failure, traced.
func (x Exploration) shrink(seed uint64, c sim.Config) *Failure {
	orig := c
	c = sim.Minimize(c, func(c sim.Config) bool { return x.scenario(seed, c, false) != nil }, true)
	f := x.scenario(seed, c, true)
	if f == nil {
		// Cannot happen (every run is the same); fall back to the
		// original world.
		c, f = orig, x.scenario(seed, orig, true)
	}
	if c.String() != orig.String() {
		f.Shrunk = c.String()
	}
	return f
}

// scenario runs one seed in world c; it returns nil when every invariant
// held.
func (x Exploration) scenario(seed uint64, c sim.Config, traced bool) *Failure {
	handler, invariant := x.Setup()
	var store lambdaidem.Store
	opts := x.Options
	if x.Store != nil {
		store = x.Store()
		// Records of earlier scenarios (and of earlier runs of this
		// seed) must not answer for this one.
		opts = append(opts[:len(opts):len(opts)], lambdaidem.WithNamespace(x.ns.next(seed)))
	}
	k := newKit(seed, store, handler, opts)
	k.explored = true
	if x.Expect != nil {
		x.Expect(k)
	}
	k.w.Tracing = traced
	k.chaos = &c
	k.Timeout, k.Visibility = c.Timeout, c.Visibility
	k.BatchSize, k.Pollers, k.MaxReceive = c.BatchSize, c.Pollers, c.MaxReceive
	k.Horizon = c.SendOver + sim.Horizon
	k.store.Faults = c.Store
	if c.Kill > 0 {
		k.store.Kill = func(string, bool) bool { return k.w.Rand().Float64() < c.Kill }
	}
	if c.Lease > 0 {
		// A lease shorter than the function's timeout, as a heartbeat
		// keeps: a paused instance outlives it.
		k.opts = append(k.opts[:len(k.opts):len(k.opts)], lambdaidem.WithLease(c.Lease))
	}
	k.std.DuplicateRate = c.SQSDup
	w, r := k.w, k.w.Rand()
	msgs := x.Messages[:min(max(c.Messages, 1), len(x.Messages))]
	// The producer sends the messages in their order, at random moments.
	times := make([]time.Duration, len(msgs))
	for i := range times {
		times[i] = time.Duration(r.Int64N(int64(c.SendOver) + 1))
	}
	slices.Sort(times)
	for i, body := range msgs {
		var opts []SendOption
		if x.GroupOf != nil {
			opts = append(opts, Group(x.GroupOf(body)))
		}
		at := times[i]
		k.lastSend = maxTime(k.lastSend, sim.Epoch.Add(at))
		w.At(at, nil, func() { k.send(body, opts) })
		if c.ProducerDup > 0 && r.Float64() < c.ProducerDup {
			again := at + time.Duration(r.Int64N(int64(90*time.Second)))
			k.lastSend = maxTime(k.lastSend, sim.Epoch.Add(again))
			dup := append(opts[:len(opts):len(opts)], Dedup(fmt.Sprintf("producer-retry-%d", i)))
			w.At(again, nil, func() {
				w.Logf("the producer sends message %d again", i)
				k.send(body, dup)
			})
		}
	}
	ops := DefaultOperators
	if x.Operators != nil {
		ops = *x.Operators
	}
	k.operators(c, ops)
	k.run(nil)
	if x.observe != nil {
		x.observe(k)
	}
	var probs []string
	if err := invariant(); err != nil {
		probs = append(probs, "your invariant: "+err.Error())
	}
	if err := k.Check(); err != nil {
		probs = append(probs, "lambdaidem: "+err.Error())
	}
	if probs == nil {
		return nil
	}
	world := fmt.Sprintf("%d messages, batches of %d, %d environments, timeout %s, visibility %s, max receive %d, "+
		"producer duplicates %.2f, SQS duplicates %.2f, pauses %.2f, crashes %.3f per step, lease %s, store faults %+v, "+
		"operators: %d redrives, %d forgets and releases (forced %.2f); "+
		"%d invocations, %d crashed, %d takeovers, %d operator actions",
		len(msgs), c.BatchSize, c.Pollers, c.Timeout, c.Visibility, c.MaxReceive,
		c.ProducerDup, c.SQSDup, c.Slow, c.Kill, c.Lease, c.Store, c.Redrive, c.Forget, c.ForceOps,
		k.sources[k.std].Invocations+k.sources[k.fifo].Invocations, k.crashes, k.takeovers, k.operatorActions)
	return &Failure{Seed: seed, Problems: probs, World: world, Trace: k.Trace()}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// AtMostOnce is an invariant over your effects: it holds while the slice
// effects points to (the orders charged, the emails sent) lists no value
// twice. Point it at the slice your fake appends to.
func AtMostOnce[T comparable](effects *[]T) func() error {
	return func() error {
		seen := make(map[T]int, len(*effects))
		for _, e := range *effects {
			seen[e]++
		}
		for _, e := range *effects {
			if n := seen[e]; n > 1 {
				return fmt.Errorf("%v happened %d times: %v", e, n, *effects)
			}
		}
		return nil
	}
}
