package sim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// request is what a simulated client sends through Wrap or httpidem.
type request struct {
	Key    string `json:"key"`
	Amount int    `json:"amount"`
	Fail   int    `json:"fail"`
	Slow   int    `json:"slow"`
	Honour bool   `json:"honour"`
	// Caller is who sends it through httpidem ("": no identity, an
	// anonymous caller); it is not part of the payload.
	Caller string `json:"-"`
	// Late fails the key's first run after its slow part (a downstream
	// that answers an error after a while), while a waiting request may
	// wait for it.
	Late bool `json:"late,omitempty"`
	// Bad names how the request's key is not one (Config.BadKeys): an
	// Idempotency-Key that is missing or malformed (httpidem), a key that
	// is empty, a key function that panics or fails, an input that is not
	// valid UTF-8 (Wrap). Fail503 answers the failures of an httpidem run
	// with a 503 response rather than an error.
	Bad     string `json:"-"`
	Fail503 bool   `json:"-"`
}

// id names the request among every caller's: the caller and the key.
func (rq request) id() string {
	if rq.Caller == "" {
		return rq.Key
	}
	return rq.Caller + "/" + rq.Key
}

// callers are the identities of HTTP clients: the first is the one
// caller of a scenario with Callers 0; with more, a real caller named
// like httpidem.Anonymous, and "" (no identity at all) beside them.
var callers = []string{"sim-client", httpidem.Anonymous, "", "alice"}

// callerOf draws a request's caller.
func (s *Scenario) callerOf() string {
	if !s.Cfg.HTTP {
		return ""
	}
	if s.Cfg.Callers <= 1 {
		return callers[0]
	}
	return callers[s.w.rng.IntN(min(s.Cfg.Callers+1, len(callers)))]
}

// reply is what the wrapped function returns; N is a large integer when
// the "wrap-bigint" knob is on, so a replay through float64 shows.
type reply map[string]any

// clients schedules the request streams: each request is sent by a
// client that gives up waiting after its own timeout and retries, so a
// retry may run beside the attempt it gave up on.
func (s *Scenario) clients() {
	c, w := s.Cfg, s.w
	if c.Requests == 0 {
		return
	}
	call := s.wrapCall()
	for i := range c.Requests {
		rq := request{Key: "r" + strconv.Itoa(w.rng.IntN(max(c.Requests/2, 1))), Amount: 10, Caller: s.callerOf()}
		switch {
		case w.rng.Float64() < c.FailN:
			rq.Fail = 1 + w.rng.IntN(2)
		case w.rng.Float64() < c.Slow:
			rq.Slow = 1 + w.rng.IntN(int(c.Timeout/time.Second)*2)
			rq.Honour = w.rng.Float64() < c.Honour
		case c.Wait > 0 && w.rng.Float64() < c.LateFail:
			rq.Slow, rq.Late = 1+w.rng.IntN(int(c.Timeout/time.Second)), true
		}
		rq.Bad = s.badRequest()
		if c.Fail503 > 0 && rq.Fail > 0 && w.rng.Float64() < c.Fail503 {
			rq.Fail503 = true
		}
		if c.ReqConflict > 0 && w.rng.Float64() < c.ReqConflict {
			// Another payload under the key: its answers must be a key
			// conflict wherever another payload's record stands.
			rq.Amount = 10 * (2 + w.rng.IntN(2))
		}
		at := time.Duration(w.rng.Int64N(int64(c.SendOver) + 1))
		s.sent++
		w.At(at, nil, func() { w.Spawn("client-"+strconv.Itoa(i), nil, func() { s.client(call, rq) }) })
		if c.Wait > 0 && w.rng.Float64() < c.Twins {
			// The same request again a moment later (a double click, a
			// second tab): it meets the first one's run in progress.
			s.sent++
			twin := at + time.Duration(w.rng.Int64N(int64(2*time.Second)))
			w.At(twin, nil, func() { w.Spawn("client-"+strconv.Itoa(i)+"-twin", nil, func() { s.client(call, rq) }) })
		}
		if c.ReqRepeat > 0 && w.rng.Float64() < c.ReqRepeat {
			// The same request again later (a client that retries on its
			// own schedule): a replay, within its result's retention or
			// after it.
			s.sent++
			again := at + time.Duration(w.rng.Int64N(int64(time.Minute)))
			w.At(again, nil, func() { w.Spawn("client-"+strconv.Itoa(i)+"-again", nil, func() { s.client(call, rq) }) })
		}
	}
}

// wrapCall returns one call of the function as a client sees it: through
// Wrap, or through httpidem (a 2xx is success).
func (s *Scenario) wrapCall() func(ctx context.Context, rq request) (reply, error) {
	c := s.Cfg
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(s.ns + "-wrap"),
		lambdaidem.WithLogger(s.logger()),
		lambdaidem.WithClock(s.w.Clock()),
		lambdaidem.WithGrace(c.Grace),
		lambdaidem.WithDeadlineMargin(c.Margin),
	}
	if c.Lease > c.Margin {
		// (A lease not longer than the margin is refused when built; the
		// SQS side of the scenario checks that.)
		opts = append(opts, lambdaidem.WithLease(c.Lease))
	}
	if c.Heartbeat > 0 {
		opts = append(opts, lambdaidem.WithHeartbeat(c.Heartbeat))
	}
	if c.AtMostOnce {
		opts = append(opts, lambdaidem.WithAtMostOnce())
	}
	if c.ResultRet > 0 {
		opts = append(opts, lambdaidem.WithResultRetention(c.ResultRet))
	}
	if c.Retention > 0 {
		opts = append(opts, lambdaidem.WithRetention(c.Retention))
	}
	if c.LargeResult {
		opts = append(opts, lambdaidem.WithMaxResultBytes(largeResult/2))
	}
	// Every call's answer is held to what the store holds (checkAnswer).
	store := s.watchWaits()
	if c.Wait > 0 {
		opts = append(opts, lambdaidem.WithWaitForCompletion(c.Wait))
	}
	if c.Observe {
		opts = append(opts, lambdaidem.WithObserver(s.obs))
	}
	if !c.HTTP {
		return s.wrapFunc(store, opts)
	}
	return s.httpCall(store, opts)
}

// wrapped is the user's function behind Wrap: it has an effect (plain or
// committed with the completion) and returns a result.
func (s *Scenario) wrapped(ctx context.Context, rq request) (reply, error) {
	w := s.w
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	k := lease.Key
	s.reqStored[rq.id()] = k
	if s.Cfg.Observe {
		s.obs.Handler(ctx, "", k)
	}
	f := s.key(k)
	me := &running{ctx: ctx, proc: w.cur.owner, msg: "request " + rq.id(), token: lease.Token}
	s.enter(k, me, lease.Attempt)
	defer s.leave(k, me)
	s.notUnknown(f, k, lease, "request "+rq.id())
	s.ranHere()
	f.runs++
	if f.runs <= rq.Fail {
		return nil, errTransient
	}
	for range rq.Slow {
		w.Sleep(time.Second)
		s.stopped(ctx, k, lease)
		if rq.Honour && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if rq.Late && f.runs == 1 {
		return nil, errTransient
	}
	if err := s.effect(ctx, f, k, lease, "request "+rq.id(), ""); err != nil {
		return nil, err
	}
	n := any(int64(f.runs))
	if s.Cfg.BigInt {
		n = int64(1<<53) + int64(f.runs)
	}
	out := reply{"n": n}
	if s.Cfg.LargeResult && f.runs%2 == 1 {
		out["pad"] = strings.Repeat("x", largeResult)
	}
	return out, nil
}

// largeResult is the padding of an oversized result; the decorator is
// then told to store at most half of it.
const largeResult = 256

// client sends one request until it gets an answer it can use, retrying
// after errors and after giving up on a slow attempt.
func (s *Scenario) client(call func(context.Context, request) (reply, error), rq request) {
	w := s.w
	for attempt := 1; attempt <= 8; attempt++ {
		s.reqSeq++
		p := &Process{Name: "req-" + strconv.Itoa(s.reqSeq)}
		ctx := w.InvocationContext(p, w.now.Add(s.Cfg.Timeout))
		s.starts[p] = w.now
		me := w.cur
		var (
			out      reply
			err      error
			finished bool
			waiting  = true
		)
		w.Spawn(p.Name, p, func() {
			defer func() {
				if waiting {
					w.Ready(me)
				}
			}()
			cctx, observed := s.obs.Call(ctx)
			out, err = call(cctx, rq)
			finished = true
			if !s.Cfg.HTTP {
				s.waiterAnswer(p, rq, out, nil, err)
			}
			if s.Cfg.Observe && (!s.Cfg.HTTP || rq.Bad == "") {
				// (httpidem answers a request without a key before Wrap:
				// no record.)
				s.obs.Done(observed, "request "+rq.id(), err, !s.Cfg.HTTP)
			}
			s.answered(p, rq, out, err)
		})
		w.At(s.Cfg.Timeout, nil, func() {
			if !p.dead {
				w.Kill(p)
			}
		})
		giveUp := w.At(s.Cfg.ClientTimeout, nil, func() {
			if waiting {
				w.Ready(me)
			}
		})
		w.Park()
		waiting = false
		giveUp.Stop()
		if finished && err == nil {
			return
		}
		if finished && err != nil && !retryable(err) {
			// The namespace holds the run number, which a replay does
			// not share: the trace names it alike in every run.
			w.Logf("client %s: final error %s", rq.Key, strings.ReplaceAll(err.Error(), s.ns, Namespace))
			return
		}
		w.Sleep(time.Duration(1+w.rng.IntN(10)) * time.Second)
	}
}

// answered checks an answer as the client receives it: a success means
// the effect committed, and every success for a key says the same unless
// a takeover, a release or a new generation ran the function again.
func (s *Scenario) answered(p *Process, rq request, out reply, err error) {
	if err != nil || out["n"] == nil {
		return // (an unkeyed run answers no number)
	}
	s.answeredOK++
	// The key the call claimed (with the default key of Wrap, a hash of
	// its input: one request name may have several).
	k, ok := s.waits.claimKey[p]
	if !ok {
		return
	}
	if s.Cfg.Tx && len(s.ledger.Tx[k]) == 0 {
		s.violate(InvAckEffect, "request %s answered as a success but its effect never committed", rq.id())
	}
	f := s.key(k)
	got := fmt.Sprint(out["n"])
	if prev, ok := s.answers[k]; ok && prev != got && f.fresh+f.takeovers+f.released == 0 {
		s.violate(InvReplay, "request %s answered %s, and %s before: a replay must return what the first call returned", rq.id(), got, prev)
	}
	s.answers[k] = got
}
