package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
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
		rq := request{Key: "r" + strconv.Itoa(w.rng.IntN(max(c.Requests/2, 1))), Amount: 10}
		switch {
		case w.rng.Float64() < c.FailN:
			rq.Fail = 1 + w.rng.IntN(2)
		case w.rng.Float64() < c.Slow:
			rq.Slow = 1 + w.rng.IntN(int(c.Timeout/time.Second)*2)
			rq.Honour = w.rng.Float64() < c.Honour
		}
		at := time.Duration(w.rng.Int64N(int64(c.SendOver) + 1))
		s.sent++
		w.At(at, nil, func() { w.Spawn("client-"+strconv.Itoa(i), nil, func() { s.client(call, rq) }) })
	}
}

// wrapCall returns one call of the function as a client sees it: through
// Wrap, or through httpidem (a 2xx is success).
func (s *Scenario) wrapCall() func(ctx context.Context, rq request) (reply, error) {
	c := s.Cfg
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(s.ns + "-wrap"),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler)),
		lambdaidem.WithClock(s.w.Clock()),
		lambdaidem.WithMaxAttempts(c.MaxAttempts),
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
	if !c.HTTP {
		f := lambdaidem.Wrap(s.store, s.wrapped, append(opts, lambdaidem.WithWrapKey(func(rq request) (string, error) { return rq.Key, nil }))...)
		return f
	}
	h := httpidem.HTTP(s.store, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		var rq request
		rq.Key = strings.Trim(r.Headers["idempotency-key"], `"`)
		rq.Fail, _ = strconv.Atoi(r.Headers["x-fail"])
		rq.Slow, _ = strconv.Atoi(r.Headers["x-slow"])
		rq.Honour = r.Headers["x-honour"] == "1"
		out, err := s.wrapped(ctx, rq)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprint(out["n"])}, nil
	}, httpidem.WithWrapOptions(opts...),
		// Every simulated client is one caller: the key space is theirs.
		httpidem.WithCaller(func(r events.APIGatewayV2HTTPRequest) string { return r.Headers["x-caller"] }))
	return func(ctx context.Context, rq request) (reply, error) {
		req := events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /pay",
			RawPath:  "/pay",
			Body:     `{"amount":10}`,
			Headers: map[string]string{
				"idempotency-key": `"` + rq.Key + `"`, "x-caller": "sim-client", "x-fail": strconv.Itoa(rq.Fail),
				"x-slow": strconv.Itoa(rq.Slow), "x-honour": map[bool]string{true: "1", false: "0"}[rq.Honour],
			},
		}
		req.RequestContext.HTTP.Method = "POST"
		resp, err := h(ctx, req)
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode/100 != 2:
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, resp.Body)
		}
		return reply{"n": resp.Body, "replayed": resp.Headers[httpidem.HeaderReplayed] == "true"}, nil
	}
}

// wrapped is the user's function behind Wrap: it has an effect (plain or
// committed with the completion) and returns a result.
func (s *Scenario) wrapped(ctx context.Context, rq request) (reply, error) {
	w := s.w
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	k := lease.Key
	s.reqStored[rq.Key] = k
	f := s.key(k)
	me := &running{ctx: ctx, proc: w.cur.owner, msg: "request " + rq.Key}
	s.enter(k, me, lease.Attempt)
	defer s.leave(k, me)
	f.runs++
	if f.runs <= rq.Fail {
		return nil, errTransient
	}
	for range rq.Slow {
		w.Sleep(time.Second)
		if rq.Honour && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err := s.effect(ctx, f, k, lease, "request "+rq.Key); err != nil {
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
			out, err = call(ctx, rq)
			finished = true
			s.answered(rq, out, err)
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
		var ae *lambdaidem.InProgressError
		if finished && err != nil && !errors.As(err, &ae) && !errors.Is(err, lambdaidem.ErrStoreUnavailable) && !errors.Is(err, errTransient) {
			w.Logf("client %s: final error %v", rq.Key, err)
			return
		}
		w.Sleep(time.Duration(1+w.rng.IntN(10)) * time.Second)
	}
}

// answered checks an answer as the client receives it: a success means
// the effect committed, and every success for a key says the same unless
// a takeover, a release or a new generation ran the function again.
func (s *Scenario) answered(rq request, out reply, err error) {
	if err != nil {
		return
	}
	s.answeredOK++
	k, ok := s.reqStored[rq.Key]
	if !ok {
		return
	}
	if s.Cfg.Tx && len(s.ledger.Tx[k]) == 0 {
		s.violate("request %s answered as a success but its effect never committed", rq.Key)
	}
	f := s.key(k)
	got := fmt.Sprint(out["n"])
	if prev, ok := s.answers[rq.Key]; ok && prev != got && f.fresh+f.takeovers+f.released == 0 {
		s.violate("request %s answered %s, and %s before: a replay must return what the first call returned", rq.Key, got, prev)
	}
	s.answers[rq.Key] = got
}
