package sim

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Liveness. The safety invariants hold of a decorator that does nothing;
// these hold it to doing its work.
//
// A heartbeat keeps its lease until the deadline (InvHeartbeat): while
// its handler runs, the heartbeat sends an extension at least every
// interval after the previous one's answer, whatever that answer was
// (a store error is retried at the next tick; only a refusal, a revoked
// lease, stops it), and each extension the store granted keeps the
// handler's context alive until the time it granted less the margin, or
// the invocation's deadline less the margin if that comes first. So a
// handler whose context ends before the deadline less the margin, with
// no refusal, must have met a lease that ran out while the heartbeat
// kept trying: no extension granted in time, and one sent within the
// last interval or still on its way.
//
// What can succeed succeeds, within its attempts (InvSucceeds): in a
// world without faults (no store errors, lost answers, late writes or
// outages, no kills, no operator forgets or releases, no redrive policy
// moving messages aside, no refused effects) and outside at-most-once
// mode (which gives up a run rather than risk a second), every message
// whose handler succeeds once it has failed fewer times than
// WithMaxAttempts allows has its key's effect by the end, unless it is a
// FIFO message behind one of its group that can never leave the queue.

// liveSeen counts what the liveness checks held: heartbeat handlers whose
// context ended while they ran, those of them that ended before the
// deadline less the margin (for want of a granted extension), and the
// messages held to succeeding.
type liveSeen struct{ ended, early, held int }

// hbLease is what the checker knows of one heartbeat lease: when its
// handler (and its heartbeat) started, the lease's end then, the end of
// the invocation less the margin, and the extensions sent.
type hbLease struct {
	start, until, limit time.Time
	ext                 []*extension
	checked             bool
}

// extension is one extension as its sender saw it: sent, and answered
// (zero while on its way) with err.
type extension struct {
	sent, now, answered time.Time
	err                 error
}

// beats registers a handler that starts under a heartbeat.
func (s *Scenario) beats(me *running) {
	if s.Cfg.Heartbeat <= 0 || me.proc == nil {
		return
	}
	lease, ok := lambdaidem.LeaseFromContext(me.ctx)
	start, started := s.starts[me.proc]
	if !ok || !started {
		return
	}
	if s.hb == nil {
		s.hb = map[string]*hbLease{}
	}
	s.hb[lease.Token] = &hbLease{start: s.w.now, until: lease.Until, limit: start.Add(s.Cfg.Timeout - s.Cfg.Margin)}
}

// onExtend notes an extension as it is sent, and returns what notes its
// answer.
func (s *Scenario) onExtend(req idemstore.ExtendRequest) func(error) {
	hb := s.hb[req.Lease.Token]
	if hb == nil {
		return func(error) {}
	}
	e := &extension{sent: s.w.now, now: req.Now}
	hb.ext = append(hb.ext, e)
	return func(err error) { e.answered, e.err = s.w.now, err }
}

// alive checks a heartbeat handler whose context has ended, once: see
// InvHeartbeat above.
func (s *Scenario) alive(ctx context.Context, k string, lease idemstore.Lease) {
	hb := s.hb[lease.Token]
	if hb == nil || hb.checked || ctx.Err() == nil {
		return
	}
	hb.checked = true
	s.live.ended++
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), idemstore.ErrLeaseLost) {
		return // not its time: a refusal (checked by InvTwoHandlers), or its own cancellation
	}
	end, _ := ctx.Deadline()
	if !end.Before(hb.limit) {
		return // the invocation's deadline less the margin
	}
	s.live.early++
	c := s.Cfg
	length := hb.until.Sub(hb.start)
	for _, e := range hb.ext {
		if e.err != nil || e.answered.IsZero() || !e.answered.Before(end) {
			continue
		}
		if want := minTime(e.now.Add(length-c.Margin), hb.limit); end.Before(want.Add(-time.Millisecond)) {
			s.violate(InvHeartbeat, "key %s: attempt %d's heartbeat extension sent at %.3fs was granted at %.3fs, which keeps the handler's context until %.3fs, but it ended at %.3fs (lease %s, margin %s)",
				k, lease.Attempt, e.now.Sub(Epoch).Seconds(), e.answered.Sub(Epoch).Seconds(), want.Sub(Epoch).Seconds(), end.Sub(Epoch).Seconds(), length, c.Margin)
			return
		}
	}
	last, sent := hb.start, 0
	for _, e := range hb.ext {
		if e.sent.After(end) {
			continue
		}
		if e.answered.IsZero() || e.answered.After(end) {
			return // an extension was on its way when the lease ran out
		}
		last, sent = maxTime(last, e.answered), sent+1
	}
	if last.Add(c.Heartbeat + time.Millisecond).Before(end) {
		what := "since the handler started at " + secs(last)
		if sent > 0 {
			what = "after " + strconv.Itoa(sent) + " extensions, the last answered at " + secs(last) + " (" + outcome(hb.ext, last) + ")"
		}
		s.violate(InvHeartbeat, "key %s: attempt %d's handler lost its context at %.3fs, before the deadline less the margin (%.3fs), with its heartbeat (every %s) silent %s: a heartbeat stops only when its lease is refused",
			k, lease.Attempt, end.Sub(Epoch).Seconds(), hb.limit.Sub(Epoch).Seconds(), c.Heartbeat, what)
	}
}

// outcome says how the extension answered at t ended.
func outcome(ext []*extension, t time.Time) string {
	for _, e := range ext {
		if e.answered.Equal(t) && e.err != nil {
			return "failed: " + refusal(e.err)
		}
	}
	return "granted"
}

func secs(t time.Time) string { return strconv.FormatFloat(t.Sub(Epoch).Seconds(), 'f', 3, 64) + "s" }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// healthy reports whether the world leaves every message that can succeed
// the means to (see InvSucceeds): no store faults, and store calls quick
// enough that a handler which honours its context (the simulated ones
// look every second) still has its outcome written within the margin,
// with room for a claim and a completion; no kills; no operator revoking
// or forgetting leases, nor deciding on unknown outcomes; no redrive
// policy moving messages aside; no effect refused; not the at-most-once
// mode.
func (c Config) healthy() bool {
	f := c.Store
	return f.ErrBefore == 0 && f.LostAfter == 0 && f.Throttle == 0 && f.Late == 0 && f.OutageFor == 0 && f.MarkErr == 0 &&
		time.Second+4*f.Latency <= c.Margin &&
		c.Kill == 0 && c.Forget == 0 && c.MaxReceive == 0 && c.TxRefuse == 0 && !c.AtMostOnce && c.Resolve == 0
}

// canSucceed reports whether a message with body b succeeds once it has
// failed the times it fails: a plain message, quick, failing fewer times
// than the attempts allowed, its first run declaring nothing (no error
// after its effect, no unknown outcome) and not panicking.
func (s *Scenario) canSucceed(b body) bool {
	return b.Kind == "plain" && b.Slow == 0 && b.Fail < s.Cfg.MaxAttempts && b.After == 0 && !b.Panic
}

// leaves reports whether a message that cannot succeed still leaves the
// queue in time (dead-lettered): so a FIFO group goes on after it.
func (s *Scenario) leaves(m *Message) bool {
	return s.Cfg.Sink && len(m.Body) < MaxMessageSize-2048
}

// eventually checks InvSucceeds at the end.
func (s *Scenario) eventually() {
	c := s.Cfg
	if !c.healthy() || c.FIFO && c.FailOnAny {
		// (A FIFO group with WithFailBatchOnAnyFailure goes on only when
		// a whole batch succeeds: no bound on when.)
		return
	}
	// A key sent with more than one body is a key conflict for all but
	// one of them.
	bodies := map[string]map[string]bool{}
	for _, m := range s.src.sent {
		k := s.keyOfMessage(m)
		if bodies[k] == nil {
			bodies[k] = map[string]bool{}
		}
		bodies[k][m.Body] = true
	}
	ok := func(m *Message) bool { return s.canSucceed(s.body(m.Body)) && len(bodies[s.keyOfMessage(m)]) == 1 }
	groups := map[string][]*Message{}
	for _, m := range s.src.sent {
		groups[m.GroupID] = append(groups[m.GroupID], m)
		if b := s.body(m.Body); b.Slow > 0 && !b.Honour {
			// A handler that outlives its invocation: the invocation
			// times out, and the records beside it lose their attempts
			// (a crash, as far as they know).
			return
		}
		if !ok(m) && !s.leaves(m) {
			// It stays in the queue for good (no dead-letter queue, or a
			// copy too large for it), in every batch that can hold it:
			// the messages after it wait for room, or for their FIFO
			// group, for ever.
			return
		}
	}
	// Time: each attempt of a message may take its slow part and then
	// wait a visibility timeout (and a long poll) before the next; a
	// poller runs one invocation at a time; a FIFO group goes on only
	// past messages that succeed or leave, one after another. A message
	// whose attempts, and those it waits for, may not fit in half the
	// horizon is not held to succeeding in it.
	attempts := func(m *Message) time.Duration {
		b := s.body(m.Body)
		switch {
		case ok(m):
			return time.Duration(b.Fail + 1)
		case b.Kind == "plain":
			return time.Duration(c.MaxAttempts + 1)
		}
		return 1
	}
	run := func(m *Message) time.Duration {
		return min(time.Duration(s.body(m.Body).Slow)*time.Second, c.Timeout) + 4*c.Store.Latency
	}
	var work time.Duration
	for _, m := range s.src.sent {
		work += attempts(m) * run(m)
	}
	work /= time.Duration(max(c.Pollers, 1))
	var check []*Message
	for _, g := range groups {
		chain := work
		for _, m := range g {
			if !c.FIFO {
				chain = work
			}
			chain += attempts(m) * (run(m) + c.Visibility + 20*time.Second)
			good := ok(m)
			if good && chain <= Horizon/2 {
				check = append(check, m)
			}
		}
	}
	slices.SortFunc(check, func(a, b *Message) int { return a.Seq - b.Seq })
	s.live.held = len(check)
	for _, m := range check {
		k := idemstore.StoredKey(s.keyOfMessage(m))
		if len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) > 0 {
			continue
		}
		status := "no record"
		if rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: k, Now: s.w.now}); err == nil {
			status = string(rec.Status) + " after " + strconv.Itoa(rec.Attempts) + " attempts"
			if rec.DeadLetterReason != "" {
				status += ", dead-lettered as " + string(rec.DeadLetterReason)
			}
		}
		s.violate(InvSucceeds, "message %s (key %s) fails %d times and may be tried %d times, in a world without faults, but its key never had its effect (%s)",
			m.ID, k, s.body(m.Body).Fail, c.MaxAttempts, status)
	}
}
