package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// waits is what the checker of the request streams' answers (Wrap and
// httpidem; with Config.Wait, lambdaidem.WithWaitForCompletion) saw: per
// invocation, the key and payload hash it claimed with, whether it read
// the record (Wrap reads a record only while it waits for a run in
// progress), whether it ran the function, when it last read the record
// (a claim or a read: what its answer is decided on) and the record that
// read returned; per stored key, every result a completion stored and
// every failure Wrap asked the store to record, each with the payload
// hash of the claim it was written under.
type waits struct {
	claimKey  map[*Process]string
	claimHash map[*Process]string
	waited    map[*Process]bool
	ran       map[*Process]bool
	lastRead  map[*Process]time.Time
	lastRec   map[*Process]idemstore.Record
	tokenHash map[string]string
	results   map[string][]stored
	failures  map[string][]stored
	// Waiters counts invocations that waited; Replays and Failures the
	// answers of waiters the checker held to the store: stored results,
	// and failures of the runs they waited for.
	Waiters, Replays, Failures int
	// Answers counts the successes of calls that did not run the function
	// (replays, waiters' included) checkAnswer held to the store; Late
	// the replays refused because their result was no longer kept;
	// Conflicts the calls refused as key conflicts.
	Answers, Late, Conflicts int
}

// stored is one result or failure of a key, with its payload hash and,
// for a result, the end of its retention (the record's or the result's,
// whichever comes first; zero: never).
type stored struct {
	hash  string
	data  []byte
	until time.Time
}

func newWaits() *waits {
	return &waits{
		claimKey: map[*Process]string{}, claimHash: map[*Process]string{},
		waited: map[*Process]bool{}, ran: map[*Process]bool{},
		lastRead: map[*Process]time.Time{}, lastRec: map[*Process]idemstore.Record{},
		tokenHash: map[string]string{}, results: map[string][]stored{}, failures: map[string][]stored{},
	}
}

// watchWaits starts the checker of the request streams' answers: it sees
// every claim and completion that applies through the fault layer, and
// returns the store the request streams use.
func (s *Scenario) watchWaits() idemstore.Store {
	s.waits = newWaits()
	ws := s.waits
	onClaim, onComplete := s.store.OnClaim, s.store.OnComplete
	s.store.OnClaim = func(req idemstore.ClaimRequest, res idemstore.ClaimResult) {
		if onClaim != nil {
			onClaim(req, res)
		}
		ws.tokenHash[res.Lease.Token] = req.PayloadHash
	}
	s.store.OnComplete = func(req idemstore.CompleteRequest) {
		if onComplete != nil {
			onComplete(req)
		}
		k := req.Lease.Key
		until := req.ExpiresAt
		if !req.ResultUntil.IsZero() && (until.IsZero() || req.ResultUntil.Before(until)) {
			until = req.ResultUntil
		}
		ws.results[k] = append(ws.results[k], stored{hash: ws.tokenHash[req.Lease.Token], data: req.Result, until: until})
	}
	return &waitWatch{Store: s.store, s: s}
}

// waitWatch is the store behind the request streams' Wrap and httpidem.
type waitWatch struct {
	idemstore.Store
	s *Scenario
}

// Unwrap returns the store watched, whose capabilities the handlers are
// checked against.
func (ww *waitWatch) Unwrap() idemstore.Store { return ww.Store }

func (ww *waitWatch) proc() *Process {
	if c := ww.s.w.cur; c != nil {
		return c.owner
	}
	return nil
}

// Claim implements idemstore.Store. A refused claim is a read of the
// record: the call's answer is decided on it.
func (ww *waitWatch) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	ws, p := ww.s.waits, ww.proc()
	if p != nil {
		ws.claimKey[p], ws.claimHash[p] = req.Key, req.PayloadHash
		delete(ws.lastRec, p)
	}
	res, err := ww.Store.Claim(ctx, req)
	if p != nil && err == nil && !res.Claimed {
		ws.lastRead[p], ws.lastRec[p] = req.Now, res.Record
	}
	return res, err
}

// Get implements idemstore.Store.
func (ww *waitWatch) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	ws, p := ww.s.waits, ww.proc()
	if p != nil && !ws.waited[p] {
		ws.waited[p] = true
		ws.Waiters++
		ww.s.w.Logf("%s waits for the run of %s in progress", p.Name, req.Key)
	}
	if p != nil {
		delete(ws.lastRec, p)
	}
	rec, err := ww.Store.Get(ctx, req)
	if p != nil && err == nil {
		ws.lastRead[p], ws.lastRec[p] = req.Now, rec
	}
	return rec, err
}

// Fail implements idemstore.Store. A failure is noted as asked for: its
// answer may be lost, or it may land late, and still be what a waiter
// reads.
func (ww *waitWatch) Fail(ctx context.Context, req idemstore.FailRequest) error {
	ws := ww.s.waits
	k := req.Lease.Key
	ws.failures[k] = append(ws.failures[k], stored{hash: ws.tokenHash[req.Lease.Token], data: []byte(req.Error)})
	return ww.Store.Fail(ctx, req)
}

// ranHere notes that the running invocation ran the wrapped function: its
// answer is its own run's, not one it waited for.
func (s *Scenario) ranHere() {
	if s.waits == nil || s.w.cur == nil || s.w.cur.owner == nil {
		return
	}
	s.waits.ran[s.w.cur.owner] = true
}

// waiterAnswer holds every call's answer to the store (checkAnswer), and
// that of an invocation that waited for a run in
// progress and did not run the function itself in particular: a success
// must be the stored result of a completion of the key under the same
// payload, a failure of the run it waited for the failure recorded for
// that key and payload. Wrap gives the success as the reply and the
// failure as a *lambdaidem.RunFailedError; httpidem as a replayed
// response and as 503 idempotency-original-failed.
func (s *Scenario) waiterAnswer(p *Process, rq request, out reply, resp *events.APIGatewayV2HTTPResponse, err error) {
	s.checkAnswer(p, rq, out, resp, err)
	ws := s.waits
	if ws == nil || p == nil || !ws.waited[p] || ws.ran[p] {
		return
	}
	k, hash := ws.claimKey[p], ws.claimHash[p]
	var rf *lambdaidem.RunFailedError
	switch {
	case resp != nil && resp.Headers["Idempotent-Replayed"] == "true":
		ws.Replays++
		if !slices.ContainsFunc(ws.results[k], func(r stored) bool { return r.hash == hash && sameResponse(r.data, resp) }) {
			s.violate(InvWaiters, "waiting request %s (%s) answered %d %q, which no completion of key %s with its payload stored",
				rq.Key, p.Name, resp.StatusCode, resp.Body, k)
		}
	case resp != nil && resp.StatusCode == 503 && bytes.Contains([]byte(resp.Body), []byte(`"idempotency-original-failed"`)):
		ws.Failures++
		if !slices.ContainsFunc(ws.failures[k], func(f stored) bool { return f.hash == hash }) {
			s.violate(InvWaiters, "waiting request %s (%s) answered that the request it waited for failed, but no failure of key %s with its payload was recorded",
				rq.Key, p.Name, k)
		}
	case resp != nil:
	case err == nil:
		ws.Replays++
		got, merr := json.Marshal(out)
		if merr != nil || !slices.ContainsFunc(ws.results[k], func(r stored) bool { return r.hash == hash && bytes.Equal(r.data, got) }) {
			s.violate(InvWaiters, "waiting call %s (%s) returned %s, which no completion of key %s with its payload stored",
				rq.Key, p.Name, got, k)
		}
	case errors.As(err, &rf):
		ws.Failures++
		if !slices.ContainsFunc(ws.failures[k], func(f stored) bool { return f.hash == hash && string(f.data) == rf.Message }) {
			s.violate(InvWaiters, "waiting call %s (%s) returned the failure %q, which no failure of key %s with its payload recorded", rq.Key, p.Name, rf.Message, k)
		}
	}
}

// sameResponse reports whether a replayed response is the one stored
// (Wrap's JSON of the response): its status and body.
func sameResponse(data []byte, resp *events.APIGatewayV2HTTPResponse) bool {
	var st events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(data, &st); err != nil {
		return false
	}
	return st.StatusCode == resp.StatusCode && st.Body == resp.Body
}

// httpError is an HTTP answer the simulated client did not take as a
// success.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return "HTTP " + strconv.Itoa(e.status) + ": " + e.body }

// retryable reports whether a client sends the request again after err:
// the key is busy, the store or the run failed for now.
func retryable(err error) bool {
	var ip *lambdaidem.InProgressError
	var he *httpError
	switch {
	case errors.As(err, &ip), errors.Is(err, idemstore.ErrStoreUnavailable), errors.Is(err, errTransient), errors.Is(err, lambdaidem.ErrRunFailed):
		return true
	case errors.As(err, &he):
		return he.status == 409 || he.status == 503
	}
	return false
}
