package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Namespace is the decorator's namespace prefix; each scenario adds its
// seed, so scenarios can share one table.
const Namespace = "sim"

var runs atomic.Uint64

// Horizon is how long after the last send the event source keeps
// polling; the world then runs on (leases end, late writes land) before
// the final checks.
const Horizon = 30 * time.Minute

// Result is what one scenario did and found.
type Result struct {
	Seed       uint64
	Config     Config
	Messages   int // messages the producer sent, duplicates included
	Invocation int
	Violations []string
	Trace      string
	SimTime    time.Duration
	// Answered counts successful answers to Wrap and httpidem clients;
	// Resets the redrive resets that applied.
	Answered, Resets int
	// Revoked counts leases an operator revoked while valid (forced
	// release or forget), Refused the lease extensions the store refused,
	// GroupStops the FIFO records held back after an unacknowledged one,
	// Conflicts the copies dead-lettered as key conflicts.
	Revoked, Refused, GroupStops, Conflicts int
	// Waiters counts requests that waited for a run in progress;
	// WaiterReplays and WaiterFailures their answers the checker held to
	// the store (stored results, failures of the runs they waited for).
	Waiters, WaiterReplays, WaiterFailures int
	// Replays counts the successes of Wrap and httpidem calls that did not
	// run the function, held to the stored results of their own payload;
	// LateReplays the calls refused because the result was no longer
	// kept; KeyConflicts the calls refused as key conflicts.
	Replays, LateReplays, KeyConflicts int
	// KeyTwiceBatches counts the invocations whose batch held one key
	// twice, KeyTwiceClaims the batched claims that named one key twice,
	// SharedKeys the keys delivered in more than one FIFO group,
	// LargeDeliveries the deliveries of a body near the size limit,
	// LargeCopies and TooLarge the dead-letter copies of such bodies sent,
	// and refused as too large for the DLQ.
	KeyTwiceBatches, KeyTwiceClaims, SharedKeys, LargeDeliveries, LargeCopies, TooLarge int
	// HeartbeatEnded counts the heartbeat handlers whose context ended
	// while they ran, HeartbeatEarly those that ended before the deadline
	// less the margin (the lease ran out), both held to InvHeartbeat;
	// Succeeds the messages held to InvSucceeds.
	HeartbeatEnded, HeartbeatEarly, Succeeds int
	// Optimistic counts the decorators built in the optimistic mode,
	// Commits the commits without a lease that applied.
	Optimistic, Commits int
	// Batched counts the decorators built WithBatchedWrites, Batches the
	// batched requests (claims and completions) they sent.
	Batched, Batches int
	// Decisions counts the operators' decisions on unknown outcomes that
	// applied, by decision.
	Decisions map[idemstore.Resolution]int
}

// Failed reports whether an invariant broke.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// body is what a test message carries: its key and how its handler
// behaves.
type body struct {
	Key     string `json:"key"`
	V       int    `json:"v"`
	Kind    string `json:"kind"` // plain, poison, poison1 (poison on the first run only)
	Fail    int    `json:"fail"`
	Slow    int    `json:"slow"` // seconds
	Honour  bool   `json:"honour"`
	First   bool   `json:"first"` // effect before the slow part
	Poison2 bool   `json:"poison2,omitempty"`
	// After is what the key's first run does after its effect:
	// afterError, afterUnknown, or unknownBefore (no effect at all).
	After int `json:"after,omitempty"`
	// NA declares the key's failures (Fail) NotApplied.
	NA bool `json:"na,omitempty"`
	// Pad brings the body close to SQS's size limit (Config.LargeBody).
	Pad string `json:"pad,omitempty"`
	// Panic makes the key's first run panic; RetryIn makes its failures
	// (Fail) ask to be retried after that many seconds (RetryAfter).
	// Config.Panics draws both.
	Panic   bool `json:"panic,omitempty"`
	RetryIn int  `json:"retry_in,omitempty"`
}

// What a key's first run does (body.After).
const (
	afterError    = 1 // its effect, then a plain error (the answer lost)
	afterUnknown  = 2 // its effect, then lambdaidem.OutcomeUnknown
	unknownBefore = 3 // lambdaidem.OutcomeUnknown, with no effect
)

// keyFacts is what the world saw happen to one key.
type keyFacts struct {
	claims, takeovers, fresh int
	failedAfterEffect        int
	released                 int
	// redrives counts resets a redrive applied: each is an operator's
	// decision to run a dead-lettered message again.
	redrives int
	// unrecorded maps an attempt the decorator acknowledged as an
	// unrecorded completion to the container (poller) that remembers it.
	unrecorded map[int]string
	// revoked holds the attempts whose live lease an operator revoked:
	// their completions are refused, and the key runs again.
	revoked map[int]bool
	gens    map[string]int // plain effects per generation
	// completions holds, per completion that applied, when its record or
	// its result expires (zero: never).
	completions []time.Time
	runs        int
	// token is the lease token of the key's latest claim.
	token string
	// genHash and genBody are, per generation of the record, the payload
	// hash of its first claim and that claimant's body (SQS messages).
	genHash, genBody map[string]string
	// completedBody holds the bodies whose claims completed the key.
	completedBody map[string]bool
	// forgotten counts the operator's forgets that deleted the record.
	forgotten int
	// reruns counts, per generation, the operator's decisions to run a
	// record whose outcome was unknown again: not_applied decisions and
	// redrive resets of outcome_unknown records asked for by name. At
	// most once allows one effect per generation more for each.
	reruns map[string]int
	// decided holds, per generation, the final decision an operator took
	// on it (applied, abandoned): its handler never runs again.
	decided map[string]idemstore.Resolution
	// notApplied counts the not_applied decisions per generation.
	notApplied map[string]int
	// unknownGen holds the generations whose record took an
	// outcome_unknown mark (pending or final) since the operator last
	// reset or released it: their handler must never run again.
	unknownGen map[string]bool
	// effectKey is, per generation, the effect key its runs gave the
	// keyed downstream (Config.Keyed).
	effectKey map[string]string
}

// claimFacts is what the checker knows of one lease: the claim that got
// it.
type claimFacts struct {
	key, gen, hash, msg, body string
}

type running struct {
	ctx   context.Context
	proc  *Process
	msg   string
	token string
}

// invocation is what the checker knows of one invocation of the SQS
// function: its batch, and per FIFO group the send order of the last
// message whose handler it started.
type invocation struct {
	batch   []*Message
	lastRun map[string]int
}

// Scenario is one world built from a Config: a producer, a queue with an
// event source, the decorator over a faulty store, operators, and the
// checker's record of everything that happened.
type Scenario struct {
	Seed uint64
	Cfg  Config
	// Store, when set, is the store under test (the in-memory store when
	// nil). Reset must clear it between scenarios if it is shared.
	Store idemstore.Store

	ns       string
	w        *World
	svc      *SQS
	src, dlq *Queue
	backstop *Queue
	raw      idemstore.Store
	store    *FaultStore
	ledger   *Ledger
	bodies   map[string]body
	facts    map[string]*keyFacts
	run      map[string][]*running
	msgKey   map[string]string
	acked    []string
	inv      map[*Process]*invocation
	tokens   map[string]claimFacts
	// refused holds the lease tokens whose holder's heartbeat had an
	// extension refused (an operator revoked the lease).
	refused map[string]bool
	// Counts for Result.
	nRevoked, nRefused, groupStops, conflicts int
	nOptimistic, nCommits                     int            // decorators in the optimistic mode, commits applied
	nBatched                                  int            // decorators built WithBatchedWrites
	badAcked                                  []string       // acknowledged messages whose key cannot be derived
	copies                                    map[string]int // dead-letter copies per source message
	keyDLQ                                    map[string]int // dead-letter copies per key
	// bodyOf maps each message a handler ran, and each dead-letter copy,
	// to its body: what redrive may delete as done must have had its
	// effect.
	bodyOf map[string]string
	starts map[*Process]time.Time
	// container maps each invocation to its execution environment.
	container map[*Process]string
	claimAt   map[string]time.Time // claim time per lease token
	// redriveRuns counts operator redrive runs started and ended.
	redriveRuns, redriveEnded int
	// decisions counts the operators' decisions on unknown outcomes that
	// applied.
	decisions          map[idemstore.Resolution]int
	sent               int
	answeredOK, resets int
	// Request streams (Wrap, httpidem).
	reqSeq    int
	reqStored map[string]string // request key -> stored key
	sqsKeys   map[string]bool   // keys of SQS messages
	answers   map[string]string // stored key of a request -> first answer
	waits     *waits            // requests that wait for a run in progress (Config.Wait)
	viol      []string
	// obs checks the Observer contract when Cfg.Observe.
	obs *ObserverCheck
	// seen is what the world delivered of the rarer inputs (inputs.go).
	seen inputSeen
	// effectKeys maps each effect key handlers got to its key and
	// generation.
	effectKeys map[string]string
	// hb holds the heartbeat leases by token (check_liveness.go), live
	// what the liveness checks held.
	hb   map[string]*hbLease
	live liveSeen
}

// Run runs the scenario to its end and checks it.
func Run(seed uint64, cfg Config, store idemstore.Store, tracing bool) *Result {
	s := &Scenario{Seed: seed, Cfg: cfg, Store: store}
	return s.run1(tracing)
}

func (s *Scenario) violate(inv Invariant, format string, args ...any) {
	msg := fmt.Sprintf("t=%.3fs [%s] ", s.w.now.Sub(Epoch).Seconds(), inv) + fmt.Sprintf(format, args...)
	s.w.Logf("VIOLATION %s", msg)
	if len(s.viol) < 20 {
		s.viol = append(s.viol, msg)
	}
}

func (s *Scenario) key(k string) *keyFacts {
	f := s.facts[k]
	if f == nil {
		f = &keyFacts{gens: map[string]int{}, effectKey: map[string]string{}, unrecorded: map[int]string{}, revoked: map[int]bool{},
			genHash: map[string]string{}, genBody: map[string]string{}, completedBody: map[string]bool{},
			reruns: map[string]int{}, decided: map[string]idemstore.Resolution{},
			notApplied: map[string]int{}, unknownGen: map[string]bool{}}
		s.facts[k] = f
	}
	return f
}

func (s *Scenario) run1(tracing bool) *Result {
	c := s.Cfg
	w := NewWorld(s.Seed)
	w.Tracing = tracing
	defer w.Close()
	s.w = w
	// The run number keeps a replay (or a shrink step) on a shared store
	// from meeting an earlier run's records; names decide nothing.
	s.ns = Namespace + "-" + strconv.FormatUint(s.Seed, 36) + "-" + strconv.FormatUint(runs.Add(1), 36)
	s.svc = NewSQS(w)
	name := "src"
	if c.FIFO {
		name += ".fifo"
	}
	s.src = s.svc.NewQueue(name, c.Visibility)
	s.src.DuplicateRate = c.SQSDup
	dname := "dlq"
	if c.FIFO {
		dname += ".fifo"
	}
	s.dlq = s.svc.NewQueue(dname, 30*time.Second)
	if c.MaxReceive > 0 {
		s.backstop = s.svc.NewQueue("backstop", 30*time.Second)
		s.src.MaxReceive, s.src.DeadLetter = c.MaxReceive, s.backstop
	}
	s.ledger = NewLedger()
	s.bodies = map[string]body{}
	s.facts = map[string]*keyFacts{}
	s.run = map[string][]*running{}
	s.msgKey = map[string]string{}
	s.copies = map[string]int{}
	s.keyDLQ = map[string]int{}
	s.bodyOf = map[string]string{}
	s.starts = map[*Process]time.Time{}
	s.container = map[*Process]string{}
	s.claimAt = map[string]time.Time{}
	s.reqStored = map[string]string{}
	s.sqsKeys = map[string]bool{}
	s.answers = map[string]string{}
	s.obs = &ObserverCheck{Violate: func(format string, args ...any) { s.violate(InvObserver, format, args...) }}
	s.inv = map[*Process]*invocation{}
	s.tokens = map[string]claimFacts{}
	s.refused = map[string]bool{}
	s.decisions = map[idemstore.Resolution]int{}

	var refuse func() bool
	if c.TxRefuse > 0 {
		refuse = func() bool { return w.rng.Float64() < c.TxRefuse }
	}
	s.raw = s.Store
	if s.raw == nil {
		// The in-memory store commits the effects itself.
		s.raw = memstore.New(memstore.WithCompletionWrites(&LedgerWrites{Ledger: s.ledger, Refuse: refuse}))
	}
	var inner idemstore.Store = s.raw
	if c.Tx && s.Store != nil {
		if es, ok := inner.(EffectStore); ok {
			inner = es.WithLedger(s.ledger, refuse)
		} else {
			inner = &TxStore{Store: inner, Ledger: s.ledger, Refuse: refuse}
		}
	}
	s.store = &FaultStore{Store: inner, W: w, Faults: c.Store}
	if c.Kill > 0 {
		s.store.Kill = func(string, bool) bool { return w.rng.Float64() < c.Kill }
	}
	s.store.OnClaim = s.onClaim
	s.store.OnComplete = func(req idemstore.CompleteRequest) {
		f := s.key(req.Lease.Key)
		if f.token != "" && req.Lease.Token != f.token {
			s.violate(InvStaleOutcome, "key %s: a completion under attempt %d's lease applied after the key was claimed again", req.Lease.Key, req.Lease.Attempt)
		}
		until := req.ExpiresAt
		if !req.ResultUntil.IsZero() && (until.IsZero() || req.ResultUntil.Before(until)) {
			until = req.ResultUntil
		}
		f.completions = append(f.completions, until)
		if tc, ok := s.tokens[req.Lease.Token]; ok && tc.body != "" {
			f.completedBody[tc.body] = true
		}
	}
	s.store.OnCommit = s.onCommit
	s.store.OnExtendRefused = func(l idemstore.Lease) { s.refused[l.Token] = true; s.nRefused++ }
	s.store.OnExtend = s.onExtend
	s.store.OnDelete = func(_, k string) { s.key(k).forgotten++ }
	s.store.OnDeadLetter = func(req idemstore.DeadLetterRequest) {
		if req.Reason == idemstore.ReasonOutcomeUnknown {
			s.key(req.Lease.Key).unknownGen[req.Lease.Fence.Generation] = true
		}
	}
	s.svc.Fail = func(op, url string) error {
		switch {
		case op == "send" && url == s.dlq.URL && c.SinkFail > 0 && w.rng.Float64() < c.SinkFail:
			return errors.New("simulated SQS send failure")
		case op == "delete" && url == s.dlq.URL && c.RedriveDelFail > 0 && w.rng.Float64() < c.RedriveDelFail:
			return errors.New("simulated SQS delete failure")
		case op == "send" && url == s.src.URL && c.RedriveSendFail > 0 && w.rng.Float64() < c.RedriveSendFail:
			// Only redrive sends to the source through the client.
			return errors.New("simulated SQS send failure")
		}
		return nil
	}

	s.produce()
	until := Epoch.Add(c.SendOver + Horizon)
	es := &EventSource{
		W: w, Queue: s.src, BatchSize: c.BatchSize, Pollers: c.Pollers, Timeout: c.Timeout, Until: until,
		NewHandler: s.function,
		OnAck: func(m *Message) {
			s.acked = append(s.acked, m.ID)
			if s.unkeyable(s.body(m.Body).Kind) {
				s.badAcked = append(s.badAcked, m.ID)
			}
		},
		OnStart: func(p *Process, batch []*Message) {
			s.onBatch(batch)
			s.starts[p] = w.now
			s.container[p] = w.cur.name
			s.inv[p] = &invocation{batch: batch}
		},
		BeforeDelete: s.beforeDelete,
	}
	es.Start()
	s.clients()
	s.operators()
	w.Run(until.Add(2 * time.Hour))
	if w.Panic != nil {
		s.violate(InvProgress, "panic: %v", w.Panic)
	}
	s.final()
	res := &Result{Seed: s.Seed, Config: c, Messages: s.sent, Invocation: es.Invocations, Violations: s.viol, SimTime: w.now.Sub(Epoch),
		Answered: s.answeredOK, Resets: s.resets, Revoked: s.nRevoked, Refused: s.nRefused, GroupStops: s.groupStops, Conflicts: s.conflicts,
		Optimistic: s.nOptimistic, Commits: s.nCommits, Batched: s.nBatched, Batches: s.store.Batches, Decisions: s.decisions}
	s.inputStats(res)
	res.HeartbeatEnded, res.HeartbeatEarly, res.Succeeds = s.live.ended, s.live.early, s.live.held
	if s.waits != nil {
		res.Waiters, res.WaiterReplays, res.WaiterFailures = s.waits.Waiters, s.waits.Replays, s.waits.Failures
		res.Replays, res.LateReplays, res.KeyConflicts = s.waits.Answers, s.waits.Late, s.waits.Conflicts
	}
	if tracing {
		res.Trace = w.trace.String()
	}
	return res
}

// produce schedules the producer's sends: each message once, some twice
// with a new message ID (a producer retry).
func (s *Scenario) produce() {
	c, w := s.Cfg, s.w
	r := w.rng
	kinds := make([]body, c.Keys)
	for i := range kinds {
		b := body{Key: "k" + strconv.Itoa(i), Kind: "plain"}
		switch {
		case c.BadKey > 0 && r.Float64() < c.BadKey:
			b.Kind = "badkey"
			if r.IntN(2) == 0 {
				b.Kind = "malformed" // sent cut short: not JSON
			}
		case r.Float64() < c.Poison:
			b.Kind = "poison"
			if c.SlowPoison && r.IntN(2) == 0 {
				// Slow, and poison only on its first run (the input it
				// chokes on changes): a later holder may complete it.
				b.Kind = "poison1"
				b.Slow = 1 + r.IntN(int(c.Timeout/time.Second)*2)
			}
		case r.Float64() < c.FailN:
			b.Fail = 1 + r.IntN(3)
		case r.Float64() < c.Slow:
			b.Slow = 1 + r.IntN(int(c.Timeout/time.Second)*2)
			b.Honour = r.Float64() < c.Honour
			b.First = r.Float64() < c.EffectFirst
		}
		kinds[i] = b
	}
	// What handlers declare of their failures draws from a stream of its
	// own, so that every other draw of a seed stays what it was.
	rd := rand.New(rand.NewPCG(s.Seed, 0xdec2))
	for i, b := range kinds {
		switch {
		case b.Kind != "plain":
		case b.Fail > 0:
			b.NA = rd.Float64() < c.NotApplied
		case b.Slow > 0:
		case rd.Float64() < c.ErrAfter:
			b.After = afterError
		case rd.Float64() < c.Unknown:
			b.After = afterUnknown + rd.IntN(2)
		}
		kinds[i] = b
	}
	s.handlerFaults(kinds)
	in := s.newInputs(c.Keys)
	for range c.Messages {
		ki := r.IntN(c.Keys)
		b := kinds[ki]
		if c.Conflict > 0 && r.Float64() < c.Conflict {
			b.V = 1 + r.IntN(2)
		}
		text := in.text(ki, b)
		group, dedup := in.group(ki)
		at := time.Duration(r.Int64N(int64(c.SendOver) + 1))
		var attrs map[string]types.MessageAttributeValue
		if c.KeyBy == "attr" {
			attrs = map[string]types.MessageAttributeValue{keyAttribute: {DataType: aws.String("String"), StringValue: aws.String(b.Key)}}
		}
		attrs = in.binary(attrs)
		send := func() {
			s.sent++
			s.src.Send(text, attrs, group, dedup)
		}
		w.At(at, nil, send)
		if c.ProducerDup > 0 && r.Float64() < c.ProducerDup {
			dedup := "retry-" + strconv.Itoa(r.IntN(1<<30))
			w.At(at+time.Duration(r.Int64N(int64(90*time.Second))), nil, func() {
				s.sent++
				s.src.Send(text, attrs, group, dedup)
			})
		}
		in.twice(at, text, attrs, ki)
	}
}

// keyAttribute is the message attribute keys are read from with
// WithKeyAttribute.
const keyAttribute = "idempotency-key"

// keyOption is the scenario's key option for SQS messages.
func (s *Scenario) keyOption() lambdaidem.Option {
	switch s.Cfg.KeyBy {
	case "field":
		return lambdaidem.WithKeyJSONField("key")
	case "attr":
		return lambdaidem.WithKeyAttribute(keyAttribute)
	case "id":
		return lambdaidem.WithKeyMessageID()
	}
	return lambdaidem.WithKeyFunc(s.keyOf)
}

// unkeyable reports whether a message of body kind kind cannot be keyed
// under the scenario's options: the key function panics on "badkey", and a
// malformed body fails the key function, a JSON key field and a hash of
// JSON fields (a key from an attribute or the message ID, with the whole
// body's hash, does not read it).
func (s *Scenario) unkeyable(kind string) bool {
	switch kind {
	case "badkey":
		return s.Cfg.KeyBy == ""
	case "malformed":
		return s.Cfg.KeyBy == "" || s.Cfg.KeyBy == "field" || s.Cfg.HashFields
	}
	return false
}

// keyOfMessage is the stored key of a queued message under the scenario's
// key option.
func (s *Scenario) keyOfMessage(m *Message) string {
	switch s.Cfg.KeyBy {
	case "id":
		return m.ID
	case "attr":
		// The attribute keys even a body that does not parse.
		if a, ok := m.Attributes[keyAttribute]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return s.body(m.Body).Key
}

// function builds one execution environment's decorated handler.
func (s *Scenario) function() SQSHandler {
	c := s.Cfg
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(s.ns),
		s.keyOption(),
		lambdaidem.WithLogger(s.logger()),
		lambdaidem.WithClock(s.w.Clock()),
		lambdaidem.WithMaxAttempts(c.MaxAttempts),
		lambdaidem.WithConcurrency(c.Concurrency),
		lambdaidem.WithGrace(c.Grace),
		lambdaidem.WithDeadlineMargin(c.Margin),
		lambdaidem.WithIsolateRedeliveries(c.Isolate),
		lambdaidem.WithInvocationHook(s.hook),
	}
	if c.Lease > 0 {
		opts = append(opts, lambdaidem.WithLease(c.Lease))
	}
	if c.Cache > 0 {
		size := 1000
		if c.CacheSize > 0 {
			size = c.CacheSize
		}
		opts = append(opts, lambdaidem.WithCache(size, c.Cache))
	}
	if c.Heartbeat > 0 {
		opts = append(opts, lambdaidem.WithHeartbeat(c.Heartbeat))
	}
	if c.AtMostOnce {
		opts = append(opts, lambdaidem.WithAtMostOnce())
	}
	if c.FailOnAny {
		opts = append(opts, lambdaidem.WithFailBatchOnAnyFailure())
	}
	if c.Backoff && c.Visibility2 {
		// (WithBackoff without WithVisibility is refused when built.)
		opts = append(opts, lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(time.Second, time.Minute)))
	}
	if c.Visibility2 {
		opts = append(opts, lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(s.svc, sqsqueue.WithQueueURLs(s.svc.QueueURLs()))))
	}
	if c.Sink {
		opts = append(opts, lambdaidem.WithDeadLetterSink(&checkedSink{s: s, sink: sqsqueue.NewSink(s.svc, s.dlq.URL)}))
	}
	if c.Retention > 0 {
		opts = append(opts, lambdaidem.WithRetention(c.Retention))
	}
	if c.ResultRet > 0 {
		opts = append(opts, lambdaidem.WithResultRetention(c.ResultRet))
	}
	if c.UnfinishedRet > 0 {
		opts = append(opts, lambdaidem.WithUnfinishedRetention(c.UnfinishedRet))
	}
	if c.HashFields {
		// The fields that tell two bodies of a key apart (the others are
		// the key's own): the same payloads as the whole body's hash.
		opts = append(opts, lambdaidem.WithHashJSONFields("key", "v"))
	}
	if c.NoAllFailedError {
		opts = append(opts, lambdaidem.WithAllFailedError(false))
	}
	if c.Observe {
		opts = append(opts, lambdaidem.WithObserver(s.obs))
	}
	optimistic := s.optimisticEnv()
	if s.batchedEnv() {
		return s.buildBatched(opts, optimistic)
	}
	if optimistic {
		return s.buildOptimistic(opts)
	}
	return s.build(opts)
}

// build makes the decorator. A lease no longer than the margin must be
// refused when the decorator is built (every handler would start with no
// time left); the scenario then runs without WithLease, as a user would
// after reading the panic.
func (s *Scenario) build(opts []lambdaidem.Option) (h SQSHandler) {
	if s.Cfg.Lease <= 0 || s.Cfg.Lease > s.Cfg.Margin {
		return lambdaidem.SQS(s.store, s.handle, opts...)
	}
	refused := func() (refused bool) {
		defer func() { refused = recover() != nil }()
		h = lambdaidem.SQS(s.store, s.handle, opts...)
		return false
	}()
	if !refused {
		s.w.Logf("decorator built with WithLease(%s) not longer than the margin %s", s.Cfg.Lease, s.Cfg.Margin)
		return h
	}
	s.w.Logf("decorator refused WithLease(%s) with margin %s; built without it", s.Cfg.Lease, s.Cfg.Margin)
	return lambdaidem.SQS(s.store, s.handle, append(opts, lambdaidem.WithLease(lambdaidem.DefaultMaxLease))...)
}

// keyOf is the user's key function: the body's "key" field. A body of
// kind "badkey" makes it panic, as a key function meeting input it never
// expected would; that record alone must fail. A body that is not JSON is
// malformed, and the key function says so.
func (s *Scenario) keyOf(m events.SQSMessage) (string, error) {
	b := s.body(m.Body)
	switch b.Kind {
	case "badkey":
		panic("simulated key function panic on message " + m.MessageId)
	case "malformed":
		return "", fmt.Errorf("%w: simulated body is not JSON", lambdaidem.ErrMalformedBody)
	}
	if b.Key == "" {
		return "", idemstore.ErrMissingKey
	}
	return b.Key, nil
}

func (s *Scenario) body(text string) body {
	if b, ok := s.bodies[text]; ok {
		return b
	}
	var b body
	if json.Unmarshal([]byte(text), &b) != nil {
		b = body{Kind: "malformed"}
	}
	s.bodies[text] = b
	return b
}

var (
	errTransient = errors.New("simulated transient failure")
	errPoison    = errors.New("simulated poison message")
	// errAnswerLost is a downstream call that had its effect and then
	// answered an error (a 504).
	errAnswerLost = errors.New("simulated downstream answer lost after the effect")
)
