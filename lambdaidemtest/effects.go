package lambdaidemtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
)

// ErrAnswerLost is what Effect returns when the scenario loses the answer
// of an effect that happened: the email API sent the email and answered
// 504, the payment went through and the connection dropped. The effect is
// recorded all the same. A handler that passes it on as a plain error is
// retried in at-least-once mode (and the effect repeated, unless the
// downstream system recognises the retry by lambdaidem.EffectKey); in
// at-most-once mode it is dead-lettered as outcome unknown. A failure of
// the handler that wraps it is the kit's doing and needs no ExpectFailure.
var ErrAnswerLost = errors.New("lambdaidemtest: the effect happened, but its answer was lost")

// Effect records, from your fake, that an effect of the handler happened
// (an email sent, a card charged, a message published), under the record
// the handler runs for: ctx is the context your handler got, or one
// derived from it. what names the effect, the same for every repeat of
// it ("email welcome to alice", "charge order o-1"), so that Check can
// count the repeats; give the handler's different effects different
// names. Call it when the effect takes place, not when your fake is
// merely asked: a fake that recognises a repeat by its idempotency key
// (lambdaidem.EffectKey) and does nothing records nothing.
//
// Kit.Check then holds each effect to what the decorator's mode allows
// (see Check), with no counter of your own. Effect returns nil, or, when
// the scenario loses this effect's answer (ErrorAfterEffect; an
// Exploration draws it too), an error wrapping ErrAnswerLost for your
// fake to return as the downstream call's error. Outside a Kit's handler
// it records nothing and returns nil.
func Effect(ctx context.Context, what string) error {
	r, ok := ctx.Value(runKey{}).(*run)
	if !ok {
		return nil
	}
	k := r.kit
	k.mu.Lock()
	defer k.mu.Unlock()
	e := &effect{run: r, what: what, at: k.w.Now(), live: ctx.Err() == nil}
	r.effects = append(r.effects, e)
	k.effects = append(k.effects, e)
	k.w.Logf("effect %q for key %s by %s (attempt %d, context live: %v)", what, r.key, r.messageID, r.attempt, e.live)
	lose := r.loseAnswer
	if c := k.chaos; !lose && c != nil && c.LostAnswer > 0 {
		lose = k.w.Rand().Float64() < c.LostAnswer
	}
	if !lose {
		return nil
	}
	r.loseAnswer, e.lost = false, true
	k.w.Logf("the answer to effect %q of %s is lost", what, r.messageID)
	return fmt.Errorf("%w: %s", ErrAnswerLost, what)
}

// Effects returns the effects recorded (Effect) for an idempotency key,
// in the order they happened.
func (k *Kit) Effects(key string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, e := range k.effects {
		if e.run.key == key {
			out = append(out, e.what)
		}
	}
	return out
}

// ErrorAfterEffect is the effect happening and its answer being lost: the
// email API sends the email and answers 504. The first Effect your fake
// records during the message's first run returns an error wrapping
// ErrAnswerLost, and the handler does what it does with it. In
// at-least-once mode a handler that returns it as a plain error is
// retried, and Check reports the repeated effect, unless the downstream
// system recognised the retry by its idempotency key
// (lambdaidem.EffectKey) or the handler declared the outcome unknown
// (lambdaidem.OutcomeUnknown). In at-most-once mode the error is
// dead-lettered as outcome unknown: declare it with
// ExpectDeadLetter(key, lambdaidem.ReasonOutcomeUnknown). Check reports a
// first run that recorded no effect, which would make the scenario prove
// nothing.
func (k *Kit) ErrorAfterEffect(body string, opts ...SendOption) {
	m := k.send(body, opts)
	if m != nil {
		p := &plan{loseAnswer: true}
		k.plans[m.ID] = p
		k.lossPlans = append(k.lossPlans, lossPlan{messageID: m.ID, plan: p})
	}
	k.Run()
}

type (
	runKey    struct{}
	recordKey struct{}
)

// run is one run of the user's handler, as the kit saw it.
type run struct {
	kit       *Kit
	key       string // the stored key
	messageID string
	attempt   int    // 0 in an optimistic first delivery
	gen       string // the lease's generation ("" without a lease)
	start     time.Time
	// returned is set when the handler returned, err to what it returned.
	returned bool
	err      error
	rec      *record
	effects  []*effect
	// loseAnswer: the scenario loses the answer of the run's next effect.
	loseAnswer bool
}

// record is what the kit's observer saw of the record a run belongs to.
type record struct {
	ended   bool
	outcome lambdaidem.Outcome
	run     *run // the handler's run, when it ran
}

// effect is one effect a fake recorded.
type effect struct {
	run  *run
	what string
	at   time.Time
	live bool // the run's context had not ended
	lost bool // its answer was lost
}

// lossPlan is an ErrorAfterEffect plan, for Check to hold to.
type lossPlan struct {
	messageID string
	plan      *plan
}

// effectObserver marks each record's context, so that a run can tell how
// its record ended (or that it never did: its process died).
type effectObserver struct{ k *Kit }

func (o effectObserver) InvocationStart(ctx context.Context, _ lambdaidem.InvocationInfo) context.Context {
	return ctx
}

func (o effectObserver) InvocationEnd(context.Context, *lambdaidem.InvocationReport) {}

func (o effectObserver) RecordStart(ctx context.Context, _ lambdaidem.RecordInfo) context.Context {
	return context.WithValue(ctx, recordKey{}, &record{})
}

// RecordEnd notes how the record ended, and a completion refused after
// the handler succeeded (a completion write's condition, a write the
// store cannot commit): a failure the test must declare.
func (o effectObserver) RecordEnd(ctx context.Context, rep *lambdaidem.RecordReport) {
	r, ok := ctx.Value(recordKey{}).(*record)
	if !ok {
		return
	}
	k := o.k
	k.mu.Lock()
	r.ended, r.outcome = true, rep.Outcome
	succeeded := r.run != nil && r.run.returned && r.run.err == nil
	k.mu.Unlock()
	if succeeded && rep.Err != nil && (rep.Outcome == lambdaidem.OutcomeFailed || rep.Outcome == lambdaidem.OutcomeDeadLettered) {
		key := rep.Key
		if key == "" {
			key = rep.MessageID
		}
		k.failed(key, failure{messageID: rep.MessageID, attempt: rep.Attempt, err: rep.Err, refused: true})
	}
}

// abandonedAfter reports whether e's run was abandoned after e: its
// handler did not return an error of its own, and its record never
// recorded the run's outcome — the process died, the lease was lost
// before the completion, or the completion could not be written. That is
// the window at-least-once mode documents: the next attempt runs the
// handler again, and e may repeat. An effect made after the run's context
// ended (a paused holder that ignored it) never counts: the handler was
// told to stop.
func (e *effect) abandonedAfter() bool {
	r := e.run
	if !e.live || r.returned && r.err != nil {
		return false
	}
	if r.rec == nil || !r.rec.ended {
		return true
	}
	switch r.rec.outcome {
	case lambdaidem.OutcomeLeaseLost, lambdaidem.OutcomeUnrecorded, lambdaidem.OutcomeStoreError:
		return true
	}
	return false
}

// atMostOnce reports whether the kit's decorator runs WithAtMostOnce.
func (k *Kit) atMostOnce() bool {
	return slices.Contains(lambdaidem.OptionNames(k.opts...), "WithAtMostOnce")
}

// noteGeneration notes a generation of key's record a claim or commit
// met or made.
func (k *Kit) noteGeneration(key, gen string) {
	if gen == "" {
		return
	}
	if k.gens[key] == nil {
		k.gens[key] = map[string]bool{}
	}
	k.gens[key][gen] = true
}

// rerun counts an operator action on key that may run its handler
// again: a redrive's reset, a release, a forced forget.
func (k *Kit) rerun(key, why string) {
	k.reruns[key]++
	k.w.Logf("operator: %s %s (it may run again)", why, key)
}

// countingResetter is the kit's store's reset, with each reset that
// applied counted as an operator's decision to run the key again.
type countingResetter struct {
	idemstore.DeadLetterResetter
	k *Kit
}

func (c countingResetter) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	rec, err := c.DeadLetterResetter.ResetDeadLetter(ctx, req)
	if err == nil {
		c.k.rerun(req.Key, "redrive reset")
	}
	return rec, err
}

// checkEffects adds to probs every effect that happened more often than
// the decorator's mode allows. At-most-once: once per key. At-least-once:
// once, plus once per earlier attempt that had the effect and was then
// abandoned before its outcome was recorded (abandonedAfter). Either way
// one more per operator action that runs the key again (a redrive's
// reset, a release) and per new generation of its record (after a forget
// or the retention). And every ErrorAfterEffect must have had its effect.
func (k *Kit) checkEffects(probs []string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, lp := range k.lossPlans {
		if lp.plan.used && lp.plan.run != nil && len(lp.plan.run.effects) == 0 {
			probs = append(probs, "ErrorAfterEffect: the first run for message "+lp.messageID+
				" recorded no effect, so no answer could be lost: call lambdaidemtest.Effect(ctx, what) from your fake where the effect takes place")
		}
	}
	type group struct{ key, what string }
	by := map[group][]*effect{}
	for _, e := range k.effects {
		g := group{e.run.key, e.what}
		by[g] = append(by[g], e)
	}
	amo := k.atMostOnce()
	for _, g := range slices.SortedFunc(maps.Keys(by), func(a, b group) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.what, b.what))
	}) {
		es := by[g]
		ops := k.reruns[g.key] + max(len(k.gens[g.key])-1, 0)
		abandoned := 0
		for _, e := range es[:len(es)-1] {
			if e.abandonedAfter() {
				abandoned++
			}
		}
		allowed, mode := 1+ops, "at-most-once allows one per key"
		if !amo {
			allowed += abandoned
			mode = fmt.Sprintf("at-least-once allows one, plus one per attempt abandoned after it (%d)", abandoned)
		}
		if len(es) <= allowed {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "effect %q of key %s happened %d times; %s", g.what, strconv.Quote(g.key), len(es), mode)
		if ops > 0 {
			fmt.Fprintf(&b, ", plus one per operator action that runs it again or new generation of its record (%d)", ops)
		}
		b.WriteString(":")
		for _, e := range es {
			b.WriteString("\n  " + e.describe())
		}
		if !amo {
			b.WriteString("\n  a run that returned an error after its effect invites the retry that repeats it: pass lambdaidem.EffectKey(ctx) downstream so the retry is recognised there, or return lambdaidem.OutcomeUnknown(err) when the effect may have happened")
		}
		probs = append(probs, b.String())
	}
	return probs
}

// describe is one line of an effect's trace: when, by which run, and how
// that run ended.
func (e *effect) describe() string {
	r := e.run
	s := fmt.Sprintf("t=%.3fs message %s attempt %d", e.at.Sub(sim.Epoch).Seconds(), r.messageID, r.attempt)
	if r.gen != "" {
		s += " (generation " + r.gen + ")"
	} else {
		s += " (no lease)"
	}
	if !e.live {
		s += ", its context already ended"
	}
	if e.lost {
		s += ", its answer lost"
	}
	switch {
	case !r.returned:
		s += "; the run never returned (its process died)"
	case r.err != nil:
		s += fmt.Sprintf("; the handler returned %v", r.err)
	default:
		s += "; the handler returned nil"
	}
	switch {
	case r.rec == nil || !r.rec.ended:
		s += ", and no outcome was recorded"
	default:
		s += ", recorded as " + string(r.rec.outcome)
	}
	return s
}
