package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Message is one distinct message of a workload: one key, sent Copies
// times in its phase and LateCopies times later, and the fields that steer
// the function. The orders example (examples/orders) and the chaos function
// (cmd/lambdaidem-chaos/fn) read the same steering fields; only the name of
// the key's field differs (Function.KeyField).
type Message struct {
	// Key is the idempotency key: the body's key field and the producer's
	// key attribute.
	Key string
	// Function is the name of the Function whose queue the message goes
	// to; empty for a scenario's first function.
	Function string
	// Scenario names what the message is there to show, for a report's
	// rows ("duplicate", "poison", ...). The function never sees it.
	Scenario string
	// GroupID is the MessageGroupId: required on a FIFO queue, a fair
	// queue's tenant on a standard one.
	GroupID string

	// Poison: the handler can never succeed.
	Poison bool
	// FailTimes: the handler fails this many attempts, then succeeds.
	FailTimes int
	// Sleep: the handler sleeps this long.
	Sleep time.Duration
	// Crash is a crash point: the process exits there on the first
	// attempt. The points are the function's ("before_effect", ...).
	Crash string
	// Size pads the body to at least this many bytes.
	Size int
	// Extra are more members of the body, written as they are after the
	// key (`"email":"a@example.com"`), for a function whose bodies carry
	// more than the key and the steering fields.
	Extra string

	// Copies is how many messages carry the key in its phase. Copies sent
	// back to back often share a batch or overlap in time; a Mix spreads
	// them (Workload.Order).
	Copies int
	// LateCopies are sent in a later phase: a producer that retries long
	// after its first send succeeded.
	LateCopies int
}

// Sends is the number of messages that carry the key.
func (m Message) Sends() int { return m.Copies + m.LateCopies }

// Body is the message body as a function reads it, with the key under
// keyField. Only the fields that are set are written, in a fixed order, so
// a workload's bodies are the same from run to run.
func (m Message) Body(keyField string) string {
	var b strings.Builder
	key, _ := json.Marshal(m.Key) // a string always marshals
	fmt.Fprintf(&b, `{%q:%s`, keyField, key)
	if m.Extra != "" {
		b.WriteString("," + m.Extra)
	}
	if m.Poison {
		b.WriteString(`,"poison":true`)
	}
	if m.FailTimes > 0 {
		fmt.Fprintf(&b, `,"fail_times":%d`, m.FailTimes)
	}
	if m.Sleep > 0 {
		fmt.Fprintf(&b, `,"sleep_ms":%d`, m.Sleep.Milliseconds())
	}
	if m.Crash != "" {
		// Only the first attempt crashes: the message must be able to
		// finish. (Both functions default to [1]; it is written out.)
		point, _ := json.Marshal(m.Crash)
		fmt.Fprintf(&b, `,"crash":%s,"crash_attempts":[1]`, point)
	}
	if pad := m.Size - b.Len() - len(`,"pad":""}`); pad > 0 {
		fmt.Fprintf(&b, `,"pad":"%s"`, strings.Repeat("x", pad))
	}
	b.WriteString("}")
	return b.String()
}

// Workload is the messages of a run.
type Workload struct {
	Messages []Message
	// Order lists indexes into Messages, one per send: the send order a
	// Mix drew, duplicates spread among the others. Empty for a workload
	// declared key by key, whose phases say what they send (Expand).
	Order []int
}

// Sends is the number of messages the workload sends, duplicates and late
// copies included.
func (w Workload) Sends() int {
	n := 0
	for _, m := range w.Messages {
		n += m.Sends()
	}
	return n
}

// Find returns the message with the given key.
func (w Workload) Find(key string) (Message, bool) {
	for _, m := range w.Messages {
		if m.Key == key {
			return m, true
		}
	}
	return Message{}, false
}

// Keys returns the messages' keys, in order.
func (w Workload) Keys() []string {
	keys := make([]string, len(w.Messages))
	for i, m := range w.Messages {
		keys[i] = m.Key
	}
	return keys
}

// Where returns the messages for which keep holds, in order.
func (w Workload) Where(keep func(Message) bool) []Message {
	var out []Message
	for _, m := range w.Messages {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// Expand lists the sends of a phase: copies(m) sends of each message in
// workload order, a message's copies back to back. The result is a
// Phase's Sends.
func (w Workload) Expand(copies func(Message) int) []int {
	var out []int
	for i, m := range w.Messages {
		for range copies(m) {
			out = append(out, i)
		}
	}
	return out
}

// Mix draws a workload from a seed: Messages distinct keys, some sent
// twice, some crashing, poison or slow. The same Mix gives the same
// workload.
type Mix struct {
	// Messages is the number of distinct keys, named by KeyFormat (one %d
	// verb, the index from 0).
	Messages  int
	KeyFormat string
	// Seed drives every choice.
	Seed uint64

	// DuplicateRate is the share of keys sent twice. Each duplicate goes
	// up to DuplicateSpread sends after its original (uniform from 0).
	DuplicateRate   float64
	DuplicateSpread int
	// CrashRate is the share of keys whose first attempt exits the
	// process, spread evenly over CrashPoints in turn.
	CrashRate   float64
	CrashPoints []string
	// PoisonRate is the share of poison keys; at least MinPoison when the
	// rate is above 0.
	PoisonRate float64
	MinPoison  int
	// SlowRate is the share of keys whose handler sleeps Slow.
	SlowRate float64
	Slow     time.Duration
}

// mixStream is the second word of a Mix's PCG source ("chaos"): a seed
// draws what it drew when the chaos run drew its workload alone.
const mixStream = 0x6368616f73

// Workload draws the workload. Each key has at most one role (crash,
// poison, slow); originals go in key order, and Order spreads the
// duplicates.
func (x Mix) Workload() Workload {
	rng := rand.New(rand.NewPCG(x.Seed, mixStream))
	n := x.Messages
	w := Workload{Messages: make([]Message, n)}
	for i := range w.Messages {
		w.Messages[i] = Message{Key: fmt.Sprintf(x.KeyFormat, i), Copies: 1}
	}
	count := func(rate float64) int { return min(int(math.Round(rate*float64(n))), n) }

	roles := rng.Perm(n)
	nCrash := count(x.CrashRate)
	if len(x.CrashPoints) == 0 {
		nCrash = 0
	}
	nPoison := count(x.PoisonRate)
	if x.PoisonRate > 0 {
		nPoison = max(nPoison, x.MinPoison)
	}
	nPoison = min(nPoison, n-nCrash)
	nSlow := min(count(x.SlowRate), n-nCrash-nPoison)
	for j, i := range roles {
		switch {
		case j < nCrash:
			w.Messages[i].Crash = x.CrashPoints[j%len(x.CrashPoints)]
		case j < nCrash+nPoison:
			w.Messages[i].Poison = true
		case j < nCrash+nPoison+nSlow:
			w.Messages[i].Sleep = x.Slow
		}
	}
	for _, i := range rng.Perm(n)[:count(x.DuplicateRate)] {
		w.Messages[i].Copies = 2
	}

	type send struct {
		at  float64
		msg int
	}
	sends := make([]send, 0, n+count(x.DuplicateRate))
	for i, m := range w.Messages {
		sends = append(sends, send{at: float64(i), msg: i})
		if m.Copies > 1 {
			sends = append(sends, send{at: float64(i) + 0.5 + float64(rng.IntN(x.DuplicateSpread+1)), msg: i})
		}
	}
	sort.SliceStable(sends, func(a, b int) bool { return sends[a].at < sends[b].at })
	w.Order = make([]int, len(sends))
	for j, s := range sends {
		w.Order[j] = s.msg
	}
	return w
}
