package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Crash points of the chaos function (see cmd/lambdaidem-chaos/fn).
const (
	CrashAfterClaim       = "after_claim"
	CrashAfterEffect      = "after_effect"
	CrashDuringCompletion = "during_completion"
)

// CrashPoints lists the crash points in the order the workload assigns them.
var CrashPoints = []string{CrashAfterClaim, CrashAfterEffect, CrashDuringCompletion}

// Message is one distinct message (one key) of the workload.
type Message struct {
	Key    string
	Crash  string // a crash point, or ""
	Poison bool
	Slow   time.Duration
	// Copies is how many times it is sent: 1, or 2 for a duplicate send.
	Copies int
}

// Body is the message body in the chaos function's format.
func (m Message) Body() string {
	b, err := json.Marshal(struct {
		Key           string `json:"key"`
		Poison        bool   `json:"poison,omitempty"`
		SleepMS       int64  `json:"sleep_ms,omitempty"`
		Crash         string `json:"crash,omitempty"`
		CrashAttempts []int  `json:"crash_attempts,omitempty"`
	}{Key: m.Key, Poison: m.Poison, SleepMS: m.Slow.Milliseconds(), Crash: m.Crash, CrashAttempts: crashAttempts(m.Crash)})
	if err != nil {
		panic(err) // strings, ints and bools always marshal
	}
	return string(b)
}

func crashAttempts(point string) []int {
	if point == "" {
		return nil
	}
	// Only the first attempt crashes: the message must be able to finish.
	return []int{1}
}

// Workload is the seeded set of messages and the order they are sent in.
type Workload struct {
	Messages []Message
	// Order lists indexes into Messages, one per send, duplicates included.
	Order []int
}

// NewWorkload derives the workload from the seed and rates of c (which
// must have its defaults applied).
func NewWorkload(c Config) Workload {
	rng := rand.New(rand.NewPCG(c.Seed, 0x6368616f73)) // "chaos"
	n := c.Messages
	w := Workload{Messages: make([]Message, n)}
	for i := range w.Messages {
		w.Messages[i] = Message{Key: fmt.Sprintf("k-%06d", i), Copies: 1}
	}
	count := func(rate float64) int { return min(int(math.Round(rate*float64(n))), n) }

	// Each message has at most one special role.
	roles := rng.Perm(n)
	nCrash := count(c.CrashRate)
	nPoison := count(c.PoisonRate)
	if c.PoisonRate > 0 {
		nPoison = max(nPoison, c.MinPoison)
	}
	nPoison = min(nPoison, n-nCrash)
	nSlow := min(count(c.SlowRate), n-nCrash-nPoison)
	for j, i := range roles {
		switch {
		case j < nCrash:
			w.Messages[i].Crash = CrashPoints[j%len(CrashPoints)]
		case j < nCrash+nPoison:
			w.Messages[i].Poison = true
		case j < nCrash+nPoison+nSlow:
			w.Messages[i].Slow = c.SlowFor
		}
	}
	for _, i := range rng.Perm(n)[:count(c.DuplicateRate)] {
		w.Messages[i].Copies = 2
	}

	// Originals go in key order; a duplicate goes up to DuplicateSpread
	// sends after its original.
	type send struct {
		at  float64
		msg int
	}
	sends := make([]send, 0, n+count(c.DuplicateRate))
	for i, m := range w.Messages {
		sends = append(sends, send{at: float64(i), msg: i})
		if m.Copies > 1 {
			sends = append(sends, send{at: float64(i) + 0.5 + float64(rng.IntN(c.DuplicateSpread+1)), msg: i})
		}
	}
	sort.SliceStable(sends, func(a, b int) bool { return sends[a].at < sends[b].at })
	w.Order = make([]int, len(sends))
	for j, s := range sends {
		w.Order[j] = s.msg
	}
	return w
}

// Sends is the number of messages sent, duplicates included.
func (w Workload) Sends() int { return len(w.Order) }
