package lambdaidemtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Kit runs a handler, decorated by lambdaidem, against a simulated SQS
// queue, Lambda's event source mapping, an in-memory idempotency store, a
// dead-letter queue and a fake clock. Nothing sleeps: minutes of simulated
// time pass in microseconds, and every run is the same.
//
// Give it the handler undecorated, with the options you deploy it with;
// the kit decorates it itself, once per simulated execution environment.
// Your handler's effects go to your own fakes, which your test reads, or,
// for a transactional handler (lambdaidem.AddCompletionWrite), to the
// tables of the store the kit runs on (NewWithStore): in memory, a
// dynamotest.DB committed with each completion. The kit's clock,
// dead-letter sink, visibility changer and invocation hook replace any you
// pass (options are applied in order, the kit's last). Observers you pass
// (lambdaidem.WithObserver, an OpenTelemetry adapter) run as deployed, and
// the kit adds one of its own that holds the decorator to the Observer
// contract; Check reports what it found.
//
// Each scenario method sends its messages, lets Lambda deliver them until
// the queue is empty (or Horizon passes), and returns; read what happened
// with Runs, Outcomes, DeadLetters and Status. Scenarios may follow one
// another on one Kit: time, the store and the queues carry over.
//
// The handler runs inside the simulation, one task at a time: it may use
// its context, its fakes and goroutines of its own that it waits for, but
// real time is not simulated time (a time.Sleep in the handler really
// sleeps, and a timer never fires sooner).
//
// A Kit is not safe for concurrent use.
type Kit struct {
	// Timeout is the function's timeout (default 30 s).
	Timeout time.Duration
	// Visibility is the queue's visibility timeout (default 30 s).
	Visibility time.Duration
	// BatchSize is the event source's batch size (default 10).
	BatchSize int
	// Pollers is how many invocations run at once (default 2).
	Pollers int
	// MaxReceive is the queue's redrive policy: after this many receives
	// SQS moves a message to its own dead-letter queue (default 0: none).
	MaxReceive int
	// Horizon is how long deliveries go on after the last send at most
	// (default one hour of simulated time).
	Horizon time.Duration

	handler lambdaidem.MessageHandler
	opts    []lambdaidem.Option
	extra   []lambdaidem.Option

	w                  *sim.World
	svc                *sim.SQS
	std, fifo          *sim.Queue
	dlq, backstop      *sim.Queue
	base               lambdaidem.Store
	store              *sim.FaultStore
	plans              map[string]*plan
	runs               map[string]int
	order              []string
	outcomes           map[string][]lambdaidem.Outcome
	msgKey             map[string]string
	acked              []string
	succeeded          map[string]bool
	dlqKey, dlqMsg     map[string]bool
	ns                 string
	lastSend           time.Time
	dedups             int
	chaos              *sim.Config
	sources            map[*sim.Queue]*sim.EventSource
	obs                *sim.ObserverCheck
	problems           []string
	takeovers, crashes int

	expect   expectations
	sent     []sentCopy           // every dead-letter copy sent
	failures map[string][]failure // by key
	// explored is set for an exploration's scenarios, whose world (not
	// the test) draws crashes, pauses and a redrive policy.
	explored bool
	// running counts the handlers running now per key; operatorActions
	// the operator actions an exploration drew that applied.
	running         map[string]int
	operatorActions int

	// mu guards what a handler's own goroutines may reach through
	// Effect: the effects, the runs and their records.
	mu      sync.Mutex
	effects []*effect
	// gens holds, per key, the generations of its record claims and
	// commits met or made; reruns counts the operator actions that may
	// run a key again (redrive resets, releases).
	gens      map[string]map[string]bool
	reruns    map[string]int
	lossPlans []lossPlan
}

// plan is what a scenario does to one message's first handler run.
type plan struct {
	pause time.Duration // before the handler
	crash bool          // after the handler returned
	// pauseAfter holds the instance after the handler returned, before
	// the decorator records its completion.
	pauseAfter time.Duration
	// loseAnswer loses the answer of the run's first effect
	// (ErrorAfterEffect).
	loseAnswer bool
	used       bool
	run        *run // the run the plan was used by
}

// New returns a Kit for handler, decorated with opts, on a fresh in-memory
// store (memstore.New()), which commits no completion writes: a handler
// declared with lambdaidem.WithCompletionWrites is refused when the kit is
// made, and one that adds writes undeclared fails, and Check says so. Run
// a transactional handler with NewWithStore. Like lambdaidem.SQS, New
// panics when the options cannot work together, or need what the store
// cannot do: the kit decorates the handler once when it is built, so such
// a refusal reaches the test at once, not from inside a scenario.
func New(handler lambdaidem.MessageHandler, opts ...lambdaidem.Option) *Kit {
	return newKit(1, nil, handler, opts)
}

// NewWithStore returns a Kit for handler, decorated with opts, on store:
//   - memstore.New(memstore.WithCompletionWrites(db)), with db a
//     dynamotest.DB holding your effects tables, for a handler whose
//     effects are DynamoDB writes committed with its completion
//     (lambdaidem.AddCompletionWrite): the completion and the writes apply
//     together, fenced by the lease, and your test reads db;
//   - a real store (the DynamoDB store on DynamoDB Local, the Redis
//     store), where your effects go to your own tables. Give each Kit a
//     namespace (lambdaidem.WithNamespace) or a table of its own, so that
//     records of earlier tests do not answer for this one.
//
// The kit's simulated time is what the store sees as "now" (records
// expire by it). Status reads the store; Redrive resets records through
// it when it is a idemstore.DeadLetterResetter. NewWithStore panics
// as New does.
func NewWithStore(store lambdaidem.Store, handler lambdaidem.MessageHandler, opts ...lambdaidem.Option) *Kit {
	if store == nil {
		panic("lambdaidemtest: NewWithStore needs a store")
	}
	return newKit(1, store, handler, opts)
}

func newKit(seed uint64, store lambdaidem.Store, handler lambdaidem.MessageHandler, opts []lambdaidem.Option) *Kit {
	if store == nil {
		store = memstore.New()
	}
	w := sim.NewWorld(seed)
	svc := sim.NewSQS(w)
	k := &Kit{
		Timeout: 30 * time.Second, Visibility: 30 * time.Second, BatchSize: 10, Pollers: 2, Horizon: time.Hour,
		handler: handler, opts: opts, w: w, svc: svc,
		std:       svc.NewQueue("queue", 30*time.Second),
		fifo:      svc.NewQueue("queue.fifo", 30*time.Second),
		dlq:       svc.NewQueue("queue-dlq", 30*time.Second),
		backstop:  svc.NewQueue("queue-backstop", 30*time.Second),
		base:      store,
		plans:     map[string]*plan{},
		runs:      map[string]int{},
		outcomes:  map[string][]lambdaidem.Outcome{},
		msgKey:    map[string]string{},
		succeeded: map[string]bool{},
		dlqKey:    map[string]bool{},
		dlqMsg:    map[string]bool{},
		expect: expectations{
			deadLetters: map[string][]lambdaidem.Reason{},
			failures:    map[string]bool{},
			unfinished:  map[string]bool{},
			poisoned:    map[string]string{},
		},
		failures: map[string][]failure{},
		running:  map[string]int{},
		gens:     map[string]map[string]bool{},
		reruns:   map[string]int{},
	}
	k.obs = &sim.ObserverCheck{Violate: k.problem}
	k.store = &sim.FaultStore{Store: store, W: w}
	// A key succeeded once its completion applied (with its writes, for a
	// transactional handler), or its handler's effect happened and the
	// completion could not be written (OutcomeUnrecorded, see hook).
	k.store.OnComplete = func(req idemstore.CompleteRequest) { k.succeeded[req.Lease.Key] = true }
	// A commit of the optimistic mode (WithOptimisticCommit) is a claim
	// and a completion in one.
	k.store.OnCommit = func(req idemstore.CommitRequest, res idemstore.CommitResult, _ idemstore.Record, _ error) {
		if res.Committed {
			k.noteGeneration(req.Key, res.Record.Fence.Generation)
		}
		if res.Committed && req.Status == lambdaidem.StatusCompleted {
			k.succeeded[req.Key] = true
		}
	}
	k.store.OnClaim = func(req idemstore.ClaimRequest, res idemstore.ClaimResult) {
		k.noteGeneration(req.Key, res.Lease.Fence.Generation)
		if res.Previous == lambdaidem.StatusInProgress {
			k.takeovers++
			w.Logf("%s takes over %s's abandoned lease", req.MessageID, req.Key)
		}
	}
	// Decorate once now: what the decorator refuses when it is built
	// (options that cannot work together, or that need what the store
	// cannot do) panics here, in the test, not inside a scenario. First on
	// the store itself, as deployed: the kit's wrapper claims and
	// completes in batches (lambdaidem.WithBatchedWrites) and commits
	// without a lease (lambdaidem.WithOptimisticCommit) whatever it wraps,
	// so a store that can do neither is refused only there.
	lambdaidem.SQS(store, k.wrap, k.options()...)
	k.function()
	return k
}

// SendOption changes one message a Kit sends.
type SendOption func(*sendSpec)

type sendSpec struct {
	group, dedup string
	attrs        map[string]types.MessageAttributeValue
}

// Group sends the message to the kit's FIFO queue, in message group g.
func Group(g string) SendOption { return func(s *sendSpec) { s.group = g } }

// Dedup sets a FIFO message's deduplication ID (default: its body, as
// content-based deduplication does).
func Dedup(id string) SendOption { return func(s *sendSpec) { s.dedup = id } }

// Attr adds a String message attribute.
func Attr(name, value string) SendOption {
	return func(s *sendSpec) {
		if s.attrs == nil {
			s.attrs = map[string]types.MessageAttributeValue{}
		}
		s.attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(value)}
	}
}

// Send puts a message on the queue now, as a producer would; Run delivers
// it. It returns the message ID SQS gave it ("" when a FIFO queue dropped it
// as a duplicate within its deduplication window).
func (k *Kit) Send(body string, opts ...SendOption) string {
	m := k.send(body, opts)
	if m == nil {
		return ""
	}
	return m.ID
}

func (k *Kit) send(body string, opts []SendOption) *sim.Message {
	var s sendSpec
	for _, o := range opts {
		o(&s)
	}
	q := k.std
	if s.group != "" {
		q = k.fifo
	}
	k.lastSend = maxTime(k.lastSend, k.w.Now())
	return q.Send(body, s.attrs, s.group, s.dedup)
}

// Run delivers what is on the queues until they are empty, or until
// Horizon has passed since the last send, and lets every lease run out.
func (k *Kit) Run() { k.run(nil) }

// run starts the event sources, lets during schedule extra work, and runs
// the world to its end.
func (k *Kit) run(during func()) {
	w := k.w
	until := k.lastSend.Add(k.Horizon)
	if n := w.Now().Add(k.Horizon); n.After(until) {
		until = n
	}
	k.std.MaxReceive, k.std.DeadLetter = k.MaxReceive, k.backstop
	k.fifo.MaxReceive, k.fifo.DeadLetter = k.MaxReceive, k.backstop
	if k.MaxReceive <= 0 {
		k.std.DeadLetter, k.fifo.DeadLetter = nil, nil
	}
	k.sources = map[*sim.Queue]*sim.EventSource{}
	for _, q := range []*sim.Queue{k.std, k.fifo} {
		q.Visibility = k.Visibility
		es := &sim.EventSource{
			W: w, Queue: q, NewHandler: k.function, BatchSize: k.BatchSize, Pollers: k.Pollers,
			Timeout: k.Timeout, Until: until,
			OnAck: func(m *sim.Message) { k.acked = append(k.acked, m.ID) },
		}
		es.OnResult = func(_ []*sim.Message, _ events.SQSEventResponse, _ error, crashed bool) {
			if crashed {
				k.crashes++
			}
		}
		k.sources[q] = es
	}
	// Work a scenario schedules now runs before the pollers' first receive.
	if during != nil {
		during()
	}
	for _, q := range []*sim.Queue{k.std, k.fifo} {
		k.sources[q].Start()
	}
	// Stop polling once nothing is left to deliver (pollers wake at least
	// every 20 s, and then leave).
	var watch func()
	watch = func() {
		if !w.Now().Before(k.lastSend) && k.std.Len() == 0 && k.fifo.Len() == 0 {
			for _, es := range k.sources {
				es.Until = w.Now()
			}
			return
		}
		w.At(10*time.Second, nil, watch)
	}
	w.At(0, nil, watch)
	w.Run(until.Add(2 * time.Hour))
	if w.Panic != nil {
		k.problem("panic: %v", w.Panic)
	}
	w.Close()
	k.extra = nil
}

// function builds one execution environment's decorated handler.
func (k *Kit) function() sim.SQSHandler {
	return lambdaidem.SQS(k.store, k.wrap, k.options()...)
}

// options are an execution environment's decorator options: the user's,
// then the kit's.
func (k *Kit) options() []lambdaidem.Option {
	opts := make([]lambdaidem.Option, 0, len(k.opts)+len(k.extra)+7)
	opts = append(opts, lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	opts = append(opts, k.opts...)
	opts = append(opts,
		lambdaidem.WithClock(k.w.Clock()),
		lambdaidem.WithDeadLetterSink(sinkFunc(k.sendDeadLetter)),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(k.svc, sqsqueue.WithQueueURLs(k.svc.QueueURLs()))),
		lambdaidem.WithInvocationHook(k.hook),
		lambdaidem.WithObserver(k.obs),
		lambdaidem.WithObserver(effectObserver{k}),
	)
	opts = append(opts, k.extra...)
	return opts
}

type sinkFunc func(context.Context, lambdaidem.DeadLetter) (string, error)

func (f sinkFunc) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	return f(ctx, dl)
}

// sendDeadLetter is the real SQS sink into the kit's dead-letter queue,
// with the faults a scenario draws and a note of each copy.
func (k *Kit) sendDeadLetter(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	w := k.w
	if c := k.chaos; c != nil && c.SinkFail > 0 && w.Rand().Float64() < c.SinkFail {
		w.Logf("dead-letter send of %s fails", dl.Message.MessageId)
		return "", fmt.Errorf("lambdaidemtest: simulated SQS send failure")
	}
	if dl.Reason == "" {
		k.problem("dead-letter copy of %s has no reason", dl.Message.MessageId)
	}
	id, err := sqsqueue.NewSink(k.svc, k.dlq.URL).Send(ctx, dl)
	if err == nil {
		k.dlqKey[dl.Key], k.dlqMsg[dl.Message.MessageId] = true, true
		k.sent = append(k.sent, sentCopy{key: dl.Key, messageID: dl.Message.MessageId, reason: dl.Reason, err: dl.Error, attempts: dl.Attempts})
		w.Logf("%s (key %s) sent to the dead-letter queue: %s", dl.Message.MessageId, dl.Key, dl.Reason)
	}
	return id, err
}

// wrap is the user's handler inside the world: a scenario's pause before
// it and crash after it, and the kit's count of runs.
func (k *Kit) wrap(ctx context.Context, msg events.SQSMessage) error {
	w := k.w
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	key, _ := lambdaidem.KeyFromContext(ctx) // the lease's, or an optimistic run's without one
	p := k.plans[msg.MessageId]
	if p != nil && p.used {
		p = nil
	}
	if p != nil {
		p.used = true
	}
	var pause, pauseAfter time.Duration
	crash := false
	switch {
	case p != nil:
		pause, crash, pauseAfter = p.pause, p.crash, p.pauseAfter
	case k.chaos != nil:
		c := k.chaos
		if c.Slow > 0 && w.Rand().Float64() < c.Slow {
			pause = time.Duration(1+w.Rand().IntN(int(2*k.Timeout/time.Second))) * time.Second
		}
		crash = c.Kill > 0 && w.Rand().Float64() < c.Kill
	}
	if pause > 0 {
		w.Logf("the instance running %s pauses for %s before the handler", msg.MessageId, pause)
		w.Sleep(pause)
	}
	k.obs.Handler(ctx, msg.MessageId, "")
	k.runs[key]++
	k.order = append(k.order, key)
	w.Logf("handler runs for %s (key %s, attempt %d, lease ended: %v)", msg.MessageId, key, lease.Attempt, ctx.Err() != nil)
	rn := &run{kit: k, key: key, messageID: msg.MessageId, attempt: lease.Attempt, gen: lease.Fence.Generation, start: w.Now()}
	rn.rec, _ = ctx.Value(recordKey{}).(*record)
	if rn.rec != nil {
		k.mu.Lock()
		rn.rec.run = rn
		k.mu.Unlock()
	}
	if p != nil {
		rn.loseAnswer, p.run = p.loseAnswer, rn
	}
	err := k.runHandler(seam.WithValue(ctx, runKey{}, rn), key, msg)
	k.mu.Lock()
	rn.returned, rn.err = true, err
	k.mu.Unlock()
	w.Logf("handler for %s returns %v", msg.MessageId, err)
	if err != nil && ctx.Err() == nil {
		// A failure of the handler's own, not a reaction to its lease or
		// deadline ending (nor, when it wraps ErrAnswerLost, to an answer
		// the kit lost).
		k.failed(key, failure{messageID: msg.MessageId, attempt: lease.Attempt, err: err, kit: errors.Is(err, ErrAnswerLost)})
	}
	if pauseAfter > 0 {
		w.Logf("the instance running %s pauses for %s after the handler returned, before the completion is recorded", msg.MessageId, pauseAfter)
		w.Sleep(pauseAfter)
	}
	if crash {
		w.Logf("the instance running %s crashes after the handler, before the completion is recorded", msg.MessageId)
		w.KillCurrent()
	}
	return err
}

// runHandler runs the user's handler, counted as running on key while it
// does (a kill unwinds it too).
func (k *Kit) runHandler(ctx context.Context, key string, msg events.SQSMessage) error {
	k.running[key]++
	defer func() { k.running[key]-- }()
	return k.handler(ctx, msg)
}

func (k *Kit) hook(rep *lambdaidem.InvocationReport) {
	k.ns = rep.Namespace
	for _, r := range rep.Records {
		key := r.Key
		if key == "" {
			key = r.MessageID
		}
		k.msgKey[r.MessageID] = r.Key
		k.outcomes[key] = append(k.outcomes[key], r.Outcome)
		if r.Outcome == lambdaidem.OutcomeUnrecorded {
			k.succeeded[key] = true
		}
		k.w.Logf("%s (key %s): %s", r.MessageID, r.Key, r.Outcome)
	}
}

func (k *Kit) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	k.w.Logf("PROBLEM %s", msg)
	k.problems = append(k.problems, msg)
}

// Runs is how many times the handler ran for an idempotency key.
func (k *Kit) Runs(key string) int { return k.runs[key] }

// RunOrder is the key of every handler run, in the order they started.
func (k *Kit) RunOrder() []string { return slices.Clone(k.order) }

// Outcomes is what the decorator reported for each delivery of a key's
// messages, in order (a message without a key is reported under its ID).
func (k *Kit) Outcomes(key string) []lambdaidem.Outcome { return slices.Clone(k.outcomes[key]) }

// Status is the key's record in the idempotency store ("" when there is
// none).
func (k *Kit) Status(key string) lambdaidem.Status {
	if k.ns == "" {
		return ""
	}
	rec, err := k.base.Get(context.Background(), idemstore.GetRequest{Namespace: k.ns, Key: key, Now: k.w.Now()})
	if err != nil {
		return ""
	}
	return rec.Status
}

// DeadLetter is one copy in the kit's dead-letter queue.
type DeadLetter struct {
	// MessageID is the source message's ID; Key its idempotency key.
	MessageID, Key string
	Body           string
	Reason         lambdaidem.Reason
	// Error is the last error's text.
	Error    string
	Attempts int
}

// DeadLetters returns the copies in the dead-letter queue, oldest first.
func (k *Kit) DeadLetters() []DeadLetter {
	var out []DeadLetter
	for _, m := range k.dlq.Messages() {
		d, err := sqsqueue.ParseEvent(k.dlq.Event(m))
		if err != nil {
			out = append(out, DeadLetter{MessageID: m.ID, Body: m.Body, Error: "unreadable copy: " + err.Error()})
			continue
		}
		md := d.Metadata
		out = append(out, DeadLetter{MessageID: md.MessageID, Key: md.Key, Body: d.Body, Reason: md.Reason, Error: md.Error, Attempts: md.Attempts})
	}
	return out
}

// Queued is how many messages are still on the kit's queues (the FIFO
// queue's included), not counting dead-letter queues.
func (k *Kit) Queued() int { return k.std.Len() + k.fifo.Len() }

// Now is the kit's simulated time.
func (k *Kit) Now() time.Time { return k.w.Now() }

// Trace returns the last lines of what happened, stamped with simulated
// time, when tracing is on (see SetTrace).
func (k *Kit) Trace() string { return k.w.Trace().String() }

// SetTrace turns the trace on or off (off by default; it costs time).
func (k *Kit) SetTrace(on bool) { k.w.Tracing = on }

// Check reports what did not hold, or was not declared. What the library
// promises: no message acknowledged with neither a successful handler run
// for its key nor a dead-letter copy (lost), no dead-letter copy without
// a reason, no panic, the Observer contract kept. What the test must
// declare when it means it:
//   - every dead-letter copy (ExpectDeadLetter(key, reason)); on a Kit, a
//     declared dead letter that never happened is reported too;
//   - every failure of the handler (an error it returned while its lease
//     held, or a completion the store refused: a completion write's
//     condition, or a write the store cannot commit) (ExpectFailure(key),
//     or ExpectDeadLetter for the key);
//   - every unfinished key: a message still on the queue, moved by the
//     queue's own redrive policy, or a record left FAILED or IN_PROGRESS
//     without a successful run (ExpectUnfinished(key)).
//
// And the effects your fakes recorded with Effect, each held to what the
// decorator's mode allows, per key and effect name: at-most-once
// (WithAtMostOnce), once; at-least-once, once plus once per attempt the
// kit abandoned after that effect (its process crashed, or its lease was
// lost or its completion not written before the outcome was recorded).
// An operator action that runs the key again (a redrive's reset, a
// release) and a new generation of its record (after a forget or the
// retention) allow one more each. An effect had after the run's context
// ended (an instance paused past its lease that did not look) never
// excuses a repeat. A report lists each effect with its run and how that
// run ended.
//
// So a handler the kit cannot run, or that fails where the test expected
// success, never passes silently.
func (k *Kit) Check() error {
	probs := slices.Clone(k.problems)
	for _, id := range k.acked {
		key, ok := k.msgKey[id]
		if !ok {
			continue
		}
		if !k.succeeded[key] && !k.dlqKey[key] && !k.dlqMsg[id] {
			probs = append(probs, "lost: message "+id+" (key "+strconv.Quote(key)+") was acknowledged, but no handler run for its key succeeded and no copy went to the dead-letter queue")
		}
	}
	for _, d := range k.DeadLetters() {
		if d.Reason == "" {
			probs = append(probs, "dead-letter copy of "+d.MessageID+" has no reason")
		}
	}
	probs = k.checkDeclared(probs)
	probs = k.checkEffects(probs)
	if len(probs) == 0 {
		return nil
	}
	return &checkError{probs}
}

type checkError struct{ probs []string }

func (e *checkError) Error() string {
	s := ""
	for i, p := range e.probs {
		if i > 0 {
			s += "\n"
		}
		s += p
	}
	return s
}
