package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	// Optimistic counts the decorators built in the optimistic mode,
	// Commits the commits without a lease that applied.
	Optimistic, Commits int
	// Batched counts the decorators built WithBatchedWrites, Batches the
	// batched requests (claims and completions) they sent.
	Batched, Batches int
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
}

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
	sent                      int
	answeredOK, resets        int
	// Request streams (Wrap, httpidem).
	reqSeq    int
	reqStored map[string]string // request key -> stored key
	sqsKeys   map[string]bool   // keys of SQS messages
	answers   map[string]string // request key -> first answer
	waits     *waits            // requests that wait for a run in progress (Config.Wait)
	viol      []string
	// obs checks the Observer contract when Cfg.Observe.
	obs *ObserverCheck
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
		f = &keyFacts{gens: map[string]int{}, unrecorded: map[int]string{}, revoked: map[int]bool{},
			genHash: map[string]string{}, genBody: map[string]string{}, completedBody: map[string]bool{}}
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
	s.store.OnDelete = func(_, k string) { s.key(k).forgotten++ }
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
		Optimistic: s.nOptimistic, Commits: s.nCommits, Batched: s.nBatched, Batches: s.store.Batches}
	if s.waits != nil {
		res.Waiters, res.WaiterReplays, res.WaiterFailures = s.waits.Waiters, s.waits.Replays, s.waits.Failures
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
	for range c.Messages {
		ki := r.IntN(c.Keys)
		b := kinds[ki]
		if c.Conflict > 0 && r.Float64() < c.Conflict {
			b.V = 1 + r.IntN(2)
		}
		raw, _ := json.Marshal(b)
		text := string(raw)
		if b.Kind == "malformed" {
			text = text[:len(text)-1]
		}
		group := "g" + strconv.Itoa(ki%c.Groups)
		at := time.Duration(r.Int64N(int64(c.SendOver) + 1))
		var attrs map[string]types.MessageAttributeValue
		if c.KeyBy == "attr" {
			attrs = map[string]types.MessageAttributeValue{keyAttribute: {DataType: aws.String("String"), StringValue: aws.String(b.Key)}}
		}
		send := func() {
			s.sent++
			s.src.Send(text, attrs, group, "")
		}
		w.At(at, nil, send)
		if c.ProducerDup > 0 && r.Float64() < c.ProducerDup {
			dedup := "retry-" + strconv.Itoa(r.IntN(1<<30))
			w.At(at+time.Duration(r.Int64N(int64(90*time.Second))), nil, func() {
				s.sent++
				s.src.Send(text, attrs, group, dedup)
			})
		}
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
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler)),
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
		opts = append(opts, lambdaidem.WithCache(1000, c.Cache))
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
)

// handle is the user's handler: it reads its behaviour from the body and
// records its effect in the ledger (or commits it with the completion).
func (s *Scenario) handle(ctx context.Context, msg events.SQSMessage) error {
	w := s.w
	b := s.body(msg.Body)
	lease, leased := lambdaidem.LeaseFromContext(ctx)
	if !leased {
		// A first delivery of the optimistic mode: no lease, so no claim's
		// facts either; two copies may run at once, and the commit decides.
		lease.Key = s.storedKeyOf(msg)
	}
	k := lease.Key
	f := s.key(k)
	s.bodyOf[msg.MessageId] = msg.Body
	if s.Cfg.Observe {
		s.obs.Handler(ctx, msg.MessageId, "")
	}
	if leased {
		me := &running{ctx: ctx, proc: w.cur.owner, msg: msg.MessageId, token: lease.Token}
		s.enter(k, me, lease.Attempt)
		defer s.leave(k, me)
	}
	f.runs++
	w.Logf("handler %s key %s attempt %d (leased %v)", msg.MessageId, k, lease.Attempt, leased)
	s.inOrder(msg.MessageId)
	if tc, ok := s.tokens[lease.Token]; ok && tc.msg != msg.MessageId {
		s.violate(InvWhose, "key %s: the handler runs message %s under the lease message %s claimed", k, msg.MessageId, tc.msg)
	}
	if dl, ok := ctx.Deadline(); ok && leased {
		// A slow claim may leave a handler little time, but its context
		// must end after the claim was made: one that ended before gives
		// every attempt a dead context, whatever the store's luck.
		if at, ok := s.claimAt[lease.Token]; ok && !dl.After(at) {
			s.violate(InvProgress, "handler for %s on key %s got a context that ended at %.3fs, before its claim at %.3fs: no attempt can succeed",
				msg.MessageId, k, dl.Sub(Epoch).Seconds(), at.Sub(Epoch).Seconds())
		}
	}
	effect := func() error { return s.effect(ctx, f, k, lease, msg.MessageId, msg.Body) }
	slow := func() error {
		for range b.Slow {
			w.Sleep(time.Second)
			s.stopped(ctx, k, lease)
			if b.Honour && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	switch {
	case b.Kind == "poison":
		return lambdaidem.Poison(errPoison)
	case b.Kind == "poison1" && f.runs == 1:
		if err := slow(); err != nil {
			return err
		}
		return lambdaidem.Poison(errPoison)
	case b.Kind == "poison1":
		return effect()
	case f.runs <= b.Fail:
		return errTransient
	case b.First:
		if err := effect(); err != nil {
			return err
		}
		if err := slow(); err != nil {
			if !s.Cfg.Tx {
				f.failedAfterEffect++
			}
			return err
		}
		return nil
	}
	if err := slow(); err != nil {
		return err
	}
	return effect()
}

// enter records a handler starting on key k, and checks that no other
// handler on k still runs with a live context: its lease would still be
// valid, or the decorator failed to end its context when the lease ended.
//
// An operator who forces a release or a forget revokes a lease that is
// still valid: the key is taken over only once the revoked lease has run
// out, so this holds then too; and once the holder's heartbeat had an
// extension refused, its context must have ended at once.
func (s *Scenario) enter(k string, me *running, attempt int) {
	for _, o := range s.run[k] {
		if o.proc.Dead() || o.ctx.Err() != nil {
			continue
		}
		switch {
		case s.refused[o.token]:
			s.violate(InvTwoHandlers, "key %s: %s's lease extension was refused (an operator revoked the lease), but its handler's context is still live as %s starts (attempt %d)", k, o.msg, me.msg, attempt)
		default:
			s.violate(InvTwoHandlers, "two handlers on key %s at once: %s (context still live) and %s (attempt %d)", k, o.msg, me.msg, attempt)
		}
	}
	s.run[k] = append(s.run[k], me)
}

// stopped checks a running handler: once its heartbeat's extension was
// refused, its context must have ended (the decorator cancels it at once).
func (s *Scenario) stopped(ctx context.Context, k string, lease idemstore.Lease) {
	if s.refused[lease.Token] && ctx.Err() == nil {
		s.violate(InvTwoHandlers, "key %s: the store refused attempt %d's lease extension (the lease was revoked), but its handler's context is still live", k, lease.Attempt)
		delete(s.refused, lease.Token) // once per lease
	}
}

// inOrder checks FIFO order as a handler starts for message id: every
// message of its group sent before it is finished (deleted from the
// queue) or earlier in this very batch (the invocation report checks how
// it ended), and no later-sent message of its group ran before it in this
// invocation.
func (s *Scenario) inOrder(id string) {
	if !s.Cfg.FIFO || s.w.cur == nil {
		return
	}
	inv := s.inv[s.w.cur.owner]
	if inv == nil {
		return
	}
	pos := slices.IndexFunc(inv.batch, func(m *Message) bool { return m.ID == id })
	if pos < 0 {
		return
	}
	m := inv.batch[pos]
	for _, e := range s.src.EarlierUnfinished(m) {
		if !slices.Contains(inv.batch[:pos], e) {
			s.violate(InvFIFO, "FIFO order: message %s of group %s runs while %s, sent before it, is unfinished and not in this batch", id, m.GroupID, e.ID)
		}
	}
	if inv.lastRun == nil {
		inv.lastRun = map[string]int{}
	}
	if last := inv.lastRun[m.GroupID]; last > m.Seq {
		s.violate(InvFIFO, "FIFO order: message %s of group %s runs after a message sent after it (send order %d before %d)", id, m.GroupID, last, m.Seq)
	}
	inv.lastRun[m.GroupID] = m.Seq
}

// beforeDelete checks FIFO order as the event source acknowledges m: no
// message of its group sent before it may still be in the queue.
func (s *Scenario) beforeDelete(m *Message) {
	for _, e := range s.src.EarlierUnfinished(m) {
		s.violate(InvFIFO, "FIFO order: message %s of group %s is acknowledged while %s, sent before it, is unfinished", m.ID, m.GroupID, e.ID)
	}
}

func (s *Scenario) leave(k string, me *running) {
	s.run[k] = slices.DeleteFunc(s.run[k], func(r *running) bool { return r == me })
}

// effect has the handler's effect on key k: committed with the completion
// (Tx), or written to the ledger at once; a kill point follows.
//
// Whose effect: the effect must come from the payload the generation was
// first claimed with (body, for SQS messages; "" when the checker has no
// body to compare).
func (s *Scenario) effect(ctx context.Context, f *keyFacts, k string, lease idemstore.Lease, by, body string) error {
	w := s.w
	s.stopped(ctx, k, lease)
	gen := lease.Fence.Generation
	if tc, ok := s.tokens[lease.Token]; ok && tc.hash != f.genHash[gen] {
		s.violate(InvWhose, "whose effect: key %s has an effect by %s, whose payload is not the one generation %s was first claimed with", k, by, gen)
	} else if first := f.genBody[gen]; body != "" && first != "" && body != first {
		s.violate(InvWhose, "whose effect: key %s has an effect by %s with body %s, but generation %s was first claimed with body %s", k, by, body, gen, first)
	}
	if s.Cfg.Tx {
		return lambdaidem.AddCompletionWrite(ctx, Effect{Key: k, By: by})
	}
	s.ledger.Plain[k] = append(s.ledger.Plain[k], by)
	f.gens[lease.Fence.Generation]++
	if s.Cfg.AtMostOnce && f.gens[lease.Fence.Generation] > 1+f.redrives {
		s.violate(InvAMO, "at-most-once: key %s had its effect %d times in one generation (%d operator redrives)", k, f.gens[lease.Fence.Generation], f.redrives)
	}
	if s.Cfg.Kill > 0 && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s after the effect", w.cur.owner.Name)
		w.KillCurrent()
	}
	return nil
}

// completedUntilAfter reports whether a completion of the key had its
// record and result still kept at t.
func (f *keyFacts) completedUntilAfter(t time.Time) bool {
	for _, until := range f.completions {
		if until.IsZero() || until.After(t) {
			return true
		}
	}
	return false
}

func (s *Scenario) onClaim(req idemstore.ClaimRequest, res idemstore.ClaimResult) {
	f := s.key(req.Key)
	f.claims++
	f.token = res.Lease.Token
	s.claimAt[res.Lease.Token] = req.Now
	if req.Namespace == s.ns {
		s.sqsKeys[req.Key] = true
	}
	gen := res.Lease.Fence.Generation
	tc := claimFacts{key: req.Key, gen: gen, hash: req.PayloadHash, msg: req.MessageID, body: s.svc.Body(req.MessageID)}
	s.tokens[res.Lease.Token] = tc
	if first, ok := f.genHash[gen]; !ok {
		f.genHash[gen], f.genBody[gen] = req.PayloadHash, tc.body
	} else if first != req.PayloadHash {
		s.violate(InvWhose, "key conflict: message %s claimed key %s with another payload than generation %s's first claim: it must be refused as a key conflict", req.MessageID, req.Key, gen)
	}
	switch res.Previous {
	case idemstore.StatusInProgress:
		f.takeovers++
		var by string
		if w := s.w; w.cur != nil && w.cur.owner != nil {
			by = s.container[w.cur.owner]
		}
		s.w.Logf("takeover of %s by %s in %s (attempt %d)", req.Key, req.MessageID, by, res.Lease.Attempt)
		if c, ok := f.unrecorded[res.Lease.Attempt-1]; ok && c == by && by != "" && !f.revoked[res.Lease.Attempt-1] {
			// The container remembers that attempt's completion: it must
			// write it, never run the handler again.
			s.violate(InvUnrecorded, "key %s: %s took over attempt %d, whose completion it acknowledged unrecorded and remembers", req.Key, by, res.Lease.Attempt-1)
		}
	case "":
		// A new record (the first, or after a forget or an expiry):
		// attempts count from 1 again, so what a container remembers of
		// the old record's attempts names other leases.
		clear(f.unrecorded)
		clear(f.revoked)
		if f.claims > 1 {
			f.fresh++
			s.w.Logf("fresh generation of %s by %s", req.Key, req.MessageID)
		}
	}
}

// hook checks each invocation's reports as the decorator hands them over.
func (s *Scenario) hook(rep *lambdaidem.InvocationReport) {
	w := s.w
	var start time.Time
	if w.cur != nil && w.cur.owner != nil {
		start = s.starts[w.cur.owner]
	}
	if s.Cfg.FIFO {
		// FIFO order within the batch: once a record of a group is not
		// acknowledged, the group's later records neither run nor are
		// acknowledged.
		var stoppedBy map[string]string
		for _, r := range rep.Records {
			if r.Outcome == lambdaidem.OutcomeSkippedGroup {
				s.groupStops++
			}
			if by := stoppedBy[r.MessageGroupID]; by != "" && (r.HandlerRan || r.Acked) {
				s.violate(InvFIFO, "FIFO order: message %s of group %s ran or was acknowledged (%s) although %s, before it in the batch, was not acknowledged",
					r.MessageID, r.MessageGroupID, r.Outcome, by)
			}
			if !r.Acked && stoppedBy[r.MessageGroupID] == "" {
				if stoppedBy == nil {
					stoppedBy = map[string]string{}
				}
				stoppedBy[r.MessageGroupID] = r.MessageID
			}
		}
	}
	for _, r := range rep.Records {
		if r.Key != "" {
			s.msgKey[r.MessageID] = r.Key
		}
		if r.Outcome == lambdaidem.OutcomeUnrecorded && w.cur != nil && w.cur.owner != nil {
			s.key(r.Key).unrecorded[r.Attempt] = s.container[w.cur.owner]
		}
		switch r.Outcome {
		case lambdaidem.OutcomeProcessed:
			if s.Cfg.Tx && len(s.ledger.Tx[r.Key]) == 0 {
				s.violate(InvAckEffect, "message %s acknowledged as processed but its effect on %s never committed", r.MessageID, r.Key)
			}
		case lambdaidem.OutcomeCachedDuplicate:
			// The answer came at some moment of this invocation: a
			// completion of the key must have applied by now, with its
			// record and result not yet expired when the invocation
			// started. An operator's delete may not reach this
			// environment's cache within its TTL (documented staleness),
			// and the completions the checker saw still count then.
			f := s.key(r.Key)
			switch {
			case len(f.completions) == 0:
				rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: r.Key, Now: w.now})
				s.violate(InvCache, "message %s answered from the cache, but %s never completed (the store has it %s, %v)", r.MessageID, r.Key, rec.Status, err)
			case !f.completedUntilAfter(start):
				s.violate(InvCache, "message %s answered from the cache after every completion of %s had expired or its result retention ended (a late replay)", r.MessageID, r.Key)
			}
		}
	}
}

// checkedSink is the real SQS sink, with the checker watching each copy
// and kill points around the send.
type checkedSink struct {
	s    *Scenario
	sink *sqsqueue.Sink
}

func (k *checkedSink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s := k.s
	w := s.w
	if s.Cfg.Kill > 0 && w.cur != nil && w.cur.owner != nil && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s before the dead-letter send", w.cur.owner.Name)
		w.KillCurrent()
	}
	if dl.Reason == "" {
		s.violate(InvReasons, "dead-letter copy of %s without a reason", dl.Message.MessageId)
	}
	// The reason must say why. A message that cannot be keyed goes with
	// the reason that says why.
	switch kind := s.body(dl.Message.Body).Kind; {
	case kind == "malformed" && s.unkeyable(kind) && dl.Reason != idemstore.ReasonMalformedBody,
		kind != "malformed" && dl.Reason == idemstore.ReasonMalformedBody:
		s.violate(InvReasons, "message %s (%s body) dead-lettered as %s: a malformed body, and only one, is dead-lettered as %s", dl.Message.MessageId, kind, dl.Reason, idemstore.ReasonMalformedBody)
	case kind == "badkey" && s.unkeyable(kind) && dl.Reason != idemstore.ReasonMissingKey:
		s.violate(InvReasons, "message %s, whose key function panics, dead-lettered as %s, want %s", dl.Message.MessageId, dl.Reason, idemstore.ReasonMissingKey)
	}
	switch dl.Reason {
	case idemstore.ReasonPoison, idemstore.ReasonMaxAttempts, idemstore.ReasonOutcomeUnknown:
		// Sent by a lease holder: the work must not be done already.
		if dl.Key == "" {
			s.violate(InvReasons, "message %s dead-lettered as %s, a lease holder's reason, but no key could be derived from it", dl.Message.MessageId, dl.Reason)
			break
		}
		rec, err := s.raw.Get(ctx, idemstore.GetRequest{Namespace: s.ns, Key: dl.Key, Now: w.now})
		if err == nil && rec.Status == idemstore.StatusCompleted {
			s.violate(InvReasons, "message %s dead-lettered (%s) although key %s is COMPLETED: a stale holder sends finished work to the DLQ", dl.Message.MessageId, dl.Reason, dl.Key)
		}
	case idemstore.ReasonKeyConflict:
		// Another payload holds the key. (Checked while the key has had
		// one generation: the record read now is the one the claim met.)
		rec, err := s.raw.Get(ctx, idemstore.GetRequest{Namespace: s.ns, Key: dl.Key, Now: w.now})
		if f := s.facts[dl.Key]; err == nil && f != nil && len(f.genHash) == 1 && f.genBody[rec.Fence.Generation] == dl.Message.Body {
			s.violate(InvReasons, "message %s dead-lettered as key_conflict, but its payload is the one key %s was first claimed with", dl.Message.MessageId, dl.Key)
		}
	case idemstore.ReasonMissingKey:
		if dl.Key != "" {
			s.violate(InvReasons, "message %s dead-lettered as missing_key, but it has the key %s", dl.Message.MessageId, dl.Key)
		}
	}
	id, err := k.sink.Send(ctx, dl)
	if err != nil {
		return id, err
	}
	s.copies[dl.Message.MessageId]++
	s.keyDLQ[dl.Key]++
	if dl.Reason == idemstore.ReasonKeyConflict {
		s.conflicts++
	}
	s.bodyOf[id] = dl.Message.Body
	w.Logf("dead-lettered %s (%s) as %s", dl.Message.MessageId, dl.Reason, id)
	if s.Cfg.Kill > 0 && w.cur != nil && w.cur.owner != nil && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s after the dead-letter send", w.cur.owner.Name)
		w.KillCurrent()
	}
	return id, nil
}

// operators schedules redrives, forgets and releases at random moments,
// out of band: an operator acts whatever the function is doing, and may
// force a live lease.
func (s *Scenario) operators() {
	c, w := s.Cfg, s.w
	span := c.SendOver + Horizon/2
	for range c.Redrive {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("redrive", nil, s.redrive) })
	}
	for range c.Forget {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("forget", nil, s.forget) })
		at = time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("release", nil, s.release) })
	}
}

// redrive runs the real sqsqueue.Redrive against the simulated queues,
// resetting records through the store's conditional reset, and checks
// each reset.
func (s *Scenario) redrive() {
	w := s.w
	s.redriveRuns++
	run := s.redriveRuns
	w.Logf("operator: redrive run %d", run)
	defer func() {
		s.redriveEnded++
		w.Logf("operator: redrive run %d ended", run)
	}()
	urls := s.svc.QueueURLs()
	sources := make([]string, 0, len(urls))
	for arn := range urls {
		sources = append(sources, arn)
	}
	slices.Sort(sources)
	rc := &resetChecker{s: s, run: run, sent: map[string]bool{}}
	_, err := sqsqueue.Redrive(context.Background(), sqsqueue.RedriveOptions{
		Client:             s.svc,
		DeadLetterQueueURL: s.dlq.URL,
		SourceQueues:       sources,
		QueueURLs:          urls,
		WaitTime:           -1,
		Resetter:           rc,
		Marker:             s.store.Store,
		Progress: func(ev sqsqueue.RedriveEvent) {
			if ev.NewMessageID != "" {
				rc.sent[ev.Metadata.Key] = true
			}
			if ev.Outcome == sqsqueue.RedriveAlreadyDone {
				s.checkDone(run, ev)
			}
		},
		MaxRedrives: s.Cfg.MaxRedrives,
		Now:         func() time.Time { return s.w.now },
	})
	if err != nil {
		w.Logf("redrive: %v", err)
	}
}

// resetChecker is redrive's reset step: the store's conditional reset. It
// checks that a reset that applied only ever cleared a record this very
// DLQ copy dead-lettered, that a run never resets a key it already sent
// back (so it ends even on a message that is still poison), and that the
// record counts its redrives within the limit.
type resetChecker struct {
	s    *Scenario
	run  int
	sent map[string]bool // keys this run sent back to their queue
}

func (r *resetChecker) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	s := r.s
	// Each step of a redrive takes time, in which the function may take
	// the messages already sent back (and dead-letter them again).
	s.w.Sleep(time.Duration(1+s.w.rng.IntN(2000)) * time.Millisecond)
	// Read at the reset's own time: the record may have expired since.
	before, gerr := s.raw.Get(ctx, idemstore.GetRequest{Namespace: req.Namespace, Key: req.Key, Now: req.Now})
	rs, ok := s.store.Store.(idemstore.DeadLetterResetter)
	if !ok {
		return idemstore.Record{}, fmt.Errorf("sim: store %T has no conditional reset", s.store.Store)
	}
	rec, err := rs.ResetDeadLetter(ctx, req)
	if err == nil && (gerr != nil || before.Status != idemstore.StatusDeadLettered || before.DeadLetterMessageID != req.DeadLetterMessageID) {
		s.violate(InvRedriveReset, "redrive reset key %s whose record was %s (DLQ copy %s), not dead-lettered by copy %s",
			req.Key, before.Status, before.DeadLetterMessageID, req.DeadLetterMessageID)
	}
	if err != nil {
		return rec, err
	}
	f := s.key(req.Key)
	f.redrives++
	s.resets++
	// The reset record counts attempts from 1 again: what a container
	// remembers of earlier attempts names leases of before the reset.
	clear(f.unrecorded)
	clear(f.revoked)
	s.w.Logf("redrive run %d reset %s (copy %s, redriven %d times)", r.run, req.Key, req.DeadLetterMessageID, rec.Redrives)
	switch {
	case r.sent[req.Key]:
		s.violate(InvRedriveEnds, "redrive run %d reset key %s again after sending it back: a run must handle each key once, or it never ends on a message that is still poison", r.run, req.Key)
	case gerr == nil && rec.Redrives != before.Redrives+1:
		s.violate(InvRedriveEnds, "redrive reset key %s from %d redrives to %d: the record must count each redrive", req.Key, before.Redrives, rec.Redrives)
	case req.MaxRedrives > 0 && rec.Redrives > req.MaxRedrives:
		s.violate(InvRedriveEnds, "redrive reset key %s to %d redrives, beyond the limit %d", req.Key, rec.Redrives, req.MaxRedrives)
	}
	return rec, nil
}

// pickKey returns one key the world has claimed, or "". With live set it
// prefers a key whose handler runs now (what a forced operator action
// would cut short).
func (s *Scenario) pickKey(live bool) string {
	keys := make([]string, 0, len(s.facts))
	if live {
		for k, rs := range s.run {
			if len(rs) > 0 {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		for k := range s.facts {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return keys[s.w.rng.IntN(len(keys))]
}

// checkDone checks a copy redrive deleted as done: some message with the
// copy's body must have had its effect on the copy's key. Otherwise the
// copy's payload never ran, and deleting it lost the message.
func (s *Scenario) checkDone(run int, ev sqsqueue.RedriveEvent) {
	k, body := ev.Metadata.Key, s.bodyOf[ev.DeadLetterMessageID]
	for _, by := range slices.Concat(s.ledger.Plain[k], s.ledger.Tx[k]) {
		if s.bodyOf[by] == body {
			return
		}
	}
	s.violate(InvRedriveKeeps, "redrive run %d deleted DLQ copy %s (message %s, key %s) as done, but no message with its body had an effect on the key: its payload never ran (the record completed with payload hash %s)",
		run, ev.DeadLetterMessageID, ev.Metadata.MessageID, k, ev.Record.PayloadHash)
}

// admin is the store's operator interface, nil when the store has none
// (the scenario then runs no forget or release).
func (s *Scenario) admin() idemstore.Admin {
	a, _ := s.raw.(idemstore.Admin)
	return a
}

// forget is an operator forgetting one key with the store's Forget, as
// the CLI's forget does: sometimes forced (a live lease is revoked and the
// record forgotten once it has run out), sometimes abandoning a
// dead-lettered record's copy. It goes straight to the store: a forget
// held in the network and landing later would leave the checker behind.
func (s *Scenario) forget() {
	a := s.admin()
	if a == nil {
		return
	}
	rng := s.w.rng
	force := rng.Float64() < s.Cfg.ForceOps
	// A forced forget aims at a key whose handler runs, when there is one.
	k := s.pickKey(force)
	if k == "" {
		return
	}
	req := idemstore.ForgetRequest{
		Namespace: s.ns, Key: k, Now: s.w.now, Grace: s.Cfg.Grace,
		Force:       force,
		AbandonCopy: rng.Float64() < s.Cfg.AbandonCopy,
	}
	res, err := a.Forget(context.Background(), req)
	if err == nil {
		// Straight to the store, past OnDelete: count it here, so the
		// stranded check knows a forget (perhaps abandoning a copy) took
		// the record.
		s.key(k).forgotten++
	}
	switch {
	case err != nil:
		s.w.Logf("operator: forget %s (force %t, abandon copy %t) refused: %s", k, req.Force, req.AbandonCopy, refusal(err))
	case res.Revoked:
		s.revoke(k, res.Record.Attempts)
		s.w.Logf("operator: forget %s revoked the lease of %s; forgotten at %.3fs", k, res.Record.MessageID, res.ForgottenAt.Sub(Epoch).Seconds())
	default:
		s.w.Logf("operator: forget %s (was %s)", k, res.Record.Status)
	}
}

// revoke notes an operator's revocation of attempt's live lease on k: the
// key runs again once that lease has run out, even in a container that
// remembers (or will remember) the attempt's completion it could not
// record, whose late write the new token refuses.
func (s *Scenario) revoke(k string, attempt int) {
	s.nRevoked++
	s.key(k).revoked[attempt] = true
}

// refusal names why an operator call was refused, in words that do not
// depend on the run (an error's text holds the namespace, which does).
func refusal(err error) string {
	for _, e := range []error{idemstore.ErrNotFound, idemstore.ErrInProgress, idemstore.ErrWouldAbandonCopy,
		idemstore.ErrRecordChanged, idemstore.ErrNotInProgress, idemstore.ErrStoreUnavailable} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "another error"
}

// release is an operator releasing a lease with the store's Release, as
// the CLI's release does: an IN_PROGRESS record whose lease ended becomes
// FAILED, so the next delivery runs at once instead of after a takeover;
// a live lease is refused, or when forced revoked, and then taken over
// once it has run out.
func (s *Scenario) release() {
	a := s.admin()
	if a == nil {
		return
	}
	force := s.w.rng.Float64() < s.Cfg.ForceOps
	// A forced release aims at a key whose handler runs, when there is one.
	k := s.pickKey(force)
	if k == "" {
		return
	}
	now := s.w.now
	rec, err := a.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: k, Now: now})
	if err != nil || rec.Status != idemstore.StatusInProgress {
		return
	}
	if s.Cfg.AtMostOnce && !(force && idemstore.LeaseLive(rec, now, s.Cfg.Grace)) {
		// At most once: releasing an ended lease is the operator deciding
		// to run the key again, which the invariant would count against
		// the library. Revoking a live one is not: the key is then taken
		// over, and dead-lettered as outcome_unknown.
		return
	}
	out, err := a.Release(context.Background(), idemstore.ReleaseRequest{
		Namespace: s.ns, Key: k, Token: rec.LeaseToken, Now: now, Grace: s.Cfg.Grace, Force: force,
	})
	switch {
	case err != nil:
		s.w.Logf("operator: release %s (force %t) refused: %s", k, force, refusal(err))
	case out.Status == idemstore.StatusFailed:
		s.w.Logf("operator: release %s", k)
		s.key(k).released++
	default:
		s.revoke(k, out.Attempts)
		s.w.Logf("operator: release %s revoked the live lease of %s", k, out.MessageID)
	}
}

// final checks what must hold once everything has stopped.
func (s *Scenario) final() {
	now := s.w.now
	if s.redriveEnded != s.redriveRuns {
		s.violate(InvRedriveEnds, "%d of %d redrive runs never ended", s.redriveRuns-s.redriveEnded, s.redriveRuns)
	}
	for _, id := range s.acked {
		k, ok := s.msgKey[id]
		if !ok {
			continue
		}
		if len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 && s.copies[id] == 0 {
			s.violate(InvLost, "lost: message %s (key %s) was acknowledged with no effect and no dead-letter copy", id, k)
		}
	}
	for _, id := range s.badAcked {
		if s.copies[id] == 0 {
			s.violate(InvLost, "lost: message %s, whose key cannot be derived, was acknowledged with no dead-letter copy", id)
		}
	}
	keys := make([]string, 0, len(s.facts))
	for k := range s.facts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	queued := map[string]bool{}
	for _, q := range []*Queue{s.src, s.backstop} {
		if q != nil {
			for _, m := range q.Messages() {
				queued[s.keyOfMessage(m)] = true
			}
		}
	}
	for _, k := range keys {
		f := s.facts[k]
		if n := len(s.ledger.Tx[k]); n > 1+f.fresh {
			s.violate(InvTxOnce, "key %s: %d transactional effects (%d fresh generations): not exactly once", k, n, f.fresh)
		}
		if n := len(s.ledger.Plain[k]); n > 1+f.fresh+f.takeovers+f.failedAfterEffect+f.released+f.redrives {
			s.violate(InvRepeats, "key %s: %d effects, but only %d takeovers, %d releases, %d redrives, %d fresh generations and %d failures after an effect explain repeats",
				k, n, f.takeovers, f.released, f.redrives, f.fresh, f.failedAfterEffect)
		}
		rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: k, Now: now})
		if err != nil {
			continue
		}
		switch rec.Status {
		case idemstore.StatusCompleted:
			if len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 {
				s.violate(InvFinal, "key %s is COMPLETED in the store but its effect never happened", k)
			}
		case idemstore.StatusDeadLettered:
			if s.keyDLQ[k] == 0 {
				s.violate(InvFinal, "key %s is DEAD_LETTERED in the store but no copy was ever sent to the dead-letter queue", k)
			}
		case idemstore.StatusInProgress:
			// Every lease has ended and deliveries have stopped: an
			// unfinished record must be explained by an effect that
			// happened (an unrecorded completion), a message still
			// queued, or a dead-letter copy. Requests (Wrap) are left
			// out: their clients may simply have stopped retrying.
			if s.sqsKeys[k] && len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 && !queued[k] && s.keyDLQ[k] == 0 {
				s.violate(InvFinal, "key %s is stuck IN_PROGRESS with no effect, no queued message and no dead-letter copy", k)
			}
		}
	}
	for _, m := range s.dlq.Messages() {
		dm, err := sqsqueue.ParseEvent(s.dlq.Event(m))
		if err != nil {
			s.violate(InvReasons, "dead-letter copy %s cannot be parsed: %v", m.ID, err)
			continue
		}
		if dm.Metadata.Reason == "" {
			s.violate(InvReasons, "dead-letter copy %s has no reason", m.ID)
		}
		s.stranded(m.ID, dm, queued, now)
	}
}

// redrivenFor reports whether rec was reset by a redrive of this copy, or
// of another copy of the same payload (a message dead-lettered twice): its
// payload went back to the queue, whatever a claim held in the network did
// to the record after the reset. This copy is then sent again with
// RedriveOptions.Resend, or is a spare of the copy that went back (deleted
// as done once the key completes with its payload; by hand when the key
// was the message ID and the payload ran under a new one).
func redrivenFor(rec idemstore.Record, copyID string, md sqsqueue.Metadata) bool {
	return rec.RedrivenFrom != "" && (rec.RedrivenFrom == copyID || md.PayloadHash != "" && rec.PayloadHash == md.PayloadHash)
}

// hadEffect reports whether a message with body had its effect on key:
// then a copy of it is not unrun, even when the completion that followed
// was never recorded (the copy's work is done; it stays in the DLQ).
func (s *Scenario) hadEffect(key, body string) bool {
	for _, by := range slices.Concat(s.ledger.Plain[key], s.ledger.Tx[key]) {
		if s.bodyOf[by] == body {
			return true
		}
	}
	return false
}

// stranded checks that a lease holder's dead-letter copy whose payload
// never completed its key can still be redriven: its record is
// DEAD_LETTERED (by it or a later copy), reset by it, or a message of its
// key is still queued to take the record over. A record still IN_PROGRESS
// with nothing left to deliver, or gone without an operator's forget or a
// retention that allows it, leaves the copy in the DLQ for good; one
// whose payload a redrive sent back does not (redrivenFor).
func (s *Scenario) stranded(copyID string, dm sqsqueue.DeadLetterMessage, queued map[string]bool, now time.Time) {
	md := dm.Metadata
	switch md.Reason {
	case idemstore.ReasonPoison, idemstore.ReasonMaxAttempts, idemstore.ReasonOutcomeUnknown:
	default:
		return
	}
	f := s.facts[md.Key]
	if md.Namespace != s.ns || f == nil || f.completedBody[dm.Body] || queued[md.Key] || s.hadEffect(md.Key, dm.Body) {
		return
	}
	rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: md.Key, Now: now})
	switch {
	case errors.Is(err, idemstore.ErrNotFound) && f.forgotten == 0 && s.Cfg.UnfinishedRet == 0 && s.Cfg.Retention == 0:
		s.violate(InvRedriveKeeps, "stranded: DLQ copy of %s (key %s, %s) has no record left, nothing of its key is queued and its payload never completed: redrive can never send it back",
			md.MessageID, md.Key, md.Reason)
	case err == nil && rec.Status == idemstore.StatusInProgress && !redrivenFor(rec, copyID, md):
		s.violate(InvRedriveKeeps, "stranded: DLQ copy of %s (key %s, %s): the record stays IN_PROGRESS (dead-letter mark %q) with nothing of its key queued to take it over, and its payload never completed: redrive skips it for good",
			md.MessageID, md.Key, md.Reason, rec.DeadLetterReason)
	}
}
