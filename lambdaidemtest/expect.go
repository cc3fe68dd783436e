package lambdaidemtest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
)

// expectations are what a test declared it means to happen: Check
// reports anything of these kinds that was not declared.
type expectations struct {
	deadLetters map[string][]lambdaidem.Reason // key ("" for no key) -> reasons
	failures    map[string]bool
	unfinished  map[string]bool
	// poisoned are the messages Poison sent, by message ID, with their
	// bodies: each is meant to be dead-lettered as never able to succeed.
	poisoned map[string]string
}

// poisonReasons are the reasons that say a message can never succeed: a
// copy of a message Poison sent is accepted with one of them.
var poisonReasons = []lambdaidem.Reason{lambdaidem.ReasonPoison, lambdaidem.ReasonMaxAttempts,
	lambdaidem.ReasonMalformedBody, lambdaidem.ReasonMissingKey}

// ExpectDeadLetter declares that the message of key is meant to go to the
// dead-letter queue with reason (key "" stands for messages without a
// key, dead-lettered as lambdaidem.ReasonMissingKey or
// ReasonMalformedBody). Check then accepts
// such a copy, the copies of the key's later messages
// (lambdaidem.ReasonKeyDeadLettered), and the handler's failures for key
// that led to it; on a Kit it also requires at least one copy with reason
// to have been sent. Declare it any time before Check.
func (k *Kit) ExpectDeadLetter(key string, reason lambdaidem.Reason) {
	if !slices.Contains(k.expect.deadLetters[key], reason) {
		k.expect.deadLetters[key] = append(k.expect.deadLetters[key], reason)
	}
}

// ExpectFailure declares that the handler may fail for key (return an
// error while its lease holds, or have its completion refused) and be
// retried. Check then accepts those failures.
func (k *Kit) ExpectFailure(key string) { k.expect.failures[key] = true }

// ExpectUnfinished declares that key may be left unfinished: its message
// still on the queue when the scenario ends, moved to the queue's own
// dead-letter queue by its redrive policy (MaxReceive), or its record left
// FAILED or IN_PROGRESS with no successful run and no dead-letter copy.
func (k *Kit) ExpectUnfinished(key string) { k.expect.unfinished[key] = true }

// sentCopy is a dead-letter copy the kit's sink sent.
type sentCopy struct {
	key, messageID string
	reason         lambdaidem.Reason
	err            string
	attempts       int
}

// failure is one way the handler failed for a key.
type failure struct {
	messageID string
	attempt   int
	err       error
	refused   bool // the handler succeeded; its completion was refused
	// kit: the failure passes on an answer the kit lost (ErrAnswerLost):
	// the scenario's doing, not the handler's.
	kit bool
}

func (k *Kit) failed(key string, f failure) {
	k.failures[key] = append(k.failures[key], f)
}

// ownFailures are the failures of key that are the handler's own, not
// the kit's (see failure.kit).
func (k *Kit) ownFailures(key string) []failure {
	var out []failure
	for _, f := range k.failures[key] {
		if !f.kit {
			out = append(out, f)
		}
	}
	return out
}

// checkDeclared adds to probs what happened that the test did not
// declare, and what it declared on a Kit that did not happen. In an
// exploration the world draws crashes, pauses and a redrive policy, so
// the explorer itself accepts what those cause to a handler that never
// failed: max_attempts (or outcome_unknown) copies after abandoned
// attempts, and messages moved by the queue's redrive policy.
func (k *Kit) checkDeclared(probs []string) []string {
	e := k.expect
	e.deadLetters = k.withPoisoned(e.deadLetters)
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			probs = append(probs, p)
		}
	}
	accepted := func(c sentCopy) bool {
		if slices.Contains(e.deadLetters[c.key], c.reason) {
			return true
		}
		// The world's crashes, pauses and store faults, not the handler.
		return k.explored && len(k.ownFailures(c.key)) == 0 && (c.reason == lambdaidem.ReasonMaxAttempts || c.reason == lambdaidem.ReasonOutcomeUnknown)
	}
	for _, c := range k.sent {
		if accepted(c) {
			continue
		}
		if c.reason == lambdaidem.ReasonKeyDeadLettered && (len(e.deadLetters[c.key]) > 0 ||
			slices.ContainsFunc(k.sent, func(o sentCopy) bool { return o.key == c.key && o.reason != c.reason && accepted(o) })) {
			continue // a later message of a key whose dead letter is accepted follows it
		}
		add(fmt.Sprintf("undeclared dead letter: message %s (key %s) went to the dead-letter queue as %s after %d attempt(s): %s; "+
			"if the test means it, declare it with ExpectDeadLetter(%s, %q)%s",
			c.messageID, strconv.Quote(c.key), c.reason, c.attempts, c.err, strconv.Quote(c.key), c.reason, k.hint(c.key)))
	}
	for _, key := range slices.Sorted(maps.Keys(k.failures)) {
		fs := k.ownFailures(key)
		if len(fs) == 0 || e.failures[key] || len(e.deadLetters[key]) > 0 {
			continue
		}
		f := fs[0]
		what := "the handler failed"
		if f.refused {
			what = "the handler succeeded but its completion was refused"
		}
		add(fmt.Sprintf("undeclared failure: %s for key %s (message %s, attempt %d; %d failure(s) in all): %v; "+
			"if the test means it, declare it with ExpectFailure(%s)%s",
			what, strconv.Quote(key), f.messageID, f.attempt, len(fs), f.err, strconv.Quote(key), k.hint(key)))
	}
	for _, u := range k.unfinishedKeys() {
		if e.unfinished[u.key] || k.explored && (u.byRedrivePolicy || u.markUnwritten) {
			continue
		}
		add(fmt.Sprintf("undeclared unfinished key %s: %s; if the test means it, declare it with ExpectUnfinished(%s)",
			strconv.Quote(u.key), u.why, strconv.Quote(u.key)))
	}
	if !k.explored {
		for _, id := range slices.Sorted(maps.Keys(e.poisoned)) {
			if !k.dlqMsg[id] {
				add(fmt.Sprintf("poison message not dead-lettered: Poison sent message %s (%s), and no copy of it went to the dead-letter queue (%s)",
					id, e.poisoned[id], k.outcomesOf(id)))
			}
		}
		for _, key := range slices.Sorted(maps.Keys(k.expect.deadLetters)) {
			for _, reason := range k.expect.deadLetters[key] {
				if !slices.ContainsFunc(k.sent, func(c sentCopy) bool { return c.key == key && c.reason == reason }) {
					add(fmt.Sprintf("expected dead letter missing: ExpectDeadLetter(%s, %q) was declared, but no copy with that reason went to the dead-letter queue (%s)",
						strconv.Quote(key), reason, k.copiesOf(key)))
				}
			}
		}
	}
	return probs
}

// withPoisoned returns the declared dead letters plus what Poison
// declared: the copies of the messages it sent whose reason says they can
// never succeed, unless the kit itself caused the key's failures.
func (k *Kit) withPoisoned(declared map[string][]lambdaidem.Reason) map[string][]lambdaidem.Reason {
	out := make(map[string][]lambdaidem.Reason, len(declared))
	for key, reasons := range declared {
		out[key] = slices.Clone(reasons)
	}
	for _, c := range k.sent {
		if _, ok := k.expect.poisoned[c.messageID]; !ok || !slices.Contains(poisonReasons, c.reason) || k.kitCaused(c.key) {
			continue
		}
		if !slices.Contains(out[c.key], c.reason) {
			out[c.key] = append(out[c.key], c.reason)
		}
	}
	return out
}

// kitCaused reports whether a failure of key came from the kit itself: a
// completion write the kit's store cannot commit.
func (k *Kit) kitCaused(key string) bool {
	return slices.ContainsFunc(k.failures[key], func(f failure) bool { return errors.Is(f.err, lambdaidem.ErrUnsupportedWrite) })
}

// hint explains a failure the kit itself causes: a completion write the
// kit's store cannot commit.
func (k *Kit) hint(key string) string {
	if k.kitCaused(key) {
		return " — the kit's store cannot commit this completion write: run the kit on a store that can, such as " +
			"memstore.New(memstore.WithCompletionWrites(db)) with db a dynamotest.DB for DynamoDB writes (NewWithStore, Exploration.Store)"
	}
	return ""
}

// outcomesOf says what became of a message's key, for a report.
func (k *Kit) outcomesOf(messageID string) string {
	key, ok := k.msgKey[messageID]
	if !ok {
		return "it was never delivered"
	}
	if key == "" {
		key = messageID
	}
	return fmt.Sprintf("its key's outcomes: %v", k.outcomes[key])
}

func (k *Kit) copiesOf(key string) string {
	var rs []string
	for _, c := range k.sent {
		if c.key == key {
			rs = append(rs, string(c.reason))
		}
	}
	if len(rs) == 0 {
		return "none for that key"
	}
	return "that key's copies: " + strings.Join(rs, ", ")
}

type unfinished struct {
	key, why        string
	byRedrivePolicy bool
	// markUnwritten: its dead-letter copy was sent, but the store never
	// took the final mark, so the message was kept for it (the world's
	// store faults, in an exploration).
	markUnwritten bool
}

// unfinishedKeys lists the keys whose messages are neither done nor
// dead-lettered by the decorator when the scenario ends.
func (k *Kit) unfinishedKeys() []unfinished {
	var out []unfinished
	seen := map[string]bool{}
	keyOf := func(id, body string) string {
		if key, ok := k.msgKey[id]; ok {
			return key
		}
		return "(message " + id + ", never delivered: " + body + ")"
	}
	for _, q := range []*sim.Queue{k.std, k.fifo} {
		for _, m := range q.Messages() {
			key := keyOf(m.ID, m.Body)
			if !seen[key] {
				seen[key] = true
				if st := k.Status(key); k.dlqKey[key] && (st == lambdaidem.StatusInProgress || st == lambdaidem.StatusFailed) {
					out = append(out, unfinished{key: key, why: "its message is still on the queue when the scenario ends: a dead-letter copy was sent, but the store never took the final mark", markUnwritten: true})
					continue
				}
				out = append(out, unfinished{key: key, why: "its message is still on the queue when the scenario ends"})
			}
		}
	}
	for _, m := range k.backstop.Messages() {
		key := keyOf(m.ID, m.Body)
		if !seen[key] {
			seen[key] = true
			out = append(out, unfinished{key: key, why: "the queue's redrive policy (MaxReceive) moved its message to the queue's own dead-letter queue", byRedrivePolicy: true})
		}
	}
	// A record left FAILED or IN_PROGRESS is unfinished work only when no
	// run of its key succeeded and no copy of it went to the dead-letter
	// queue: a success whose completion could not be written, an
	// operator's release after it, or a dead-letter mark that could not be
	// written after the copy was sent leave such records behind, with the
	// key's work done.
	for _, key := range slices.Sorted(maps.Keys(k.outcomes)) {
		if seen[key] || k.succeeded[key] || k.dlqKey[key] {
			continue
		}
		switch st := k.Status(key); st {
		case lambdaidem.StatusFailed, lambdaidem.StatusInProgress:
			out = append(out, unfinished{key: key, why: fmt.Sprintf("its record is %s at the end, no run of its handler succeeded and no copy went to the dead-letter queue", st)})
		}
	}
	return out
}
