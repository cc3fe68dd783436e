package chaos

import "github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"

// Crash points of the chaos function (see cmd/lambdaidem-chaos/fn).
const (
	CrashAfterClaim       = "after_claim"
	CrashAfterEffect      = "after_effect"
	CrashDuringCompletion = "during_completion"
)

// CrashPoints lists the crash points in the order the workload assigns them.
var CrashPoints = []string{CrashAfterClaim, CrashAfterEffect, CrashDuringCompletion}

// KeyField is the field of the chaos function's body that holds the key.
const KeyField = "key"

// Message is one distinct message (one key) of the workload: its Crash
// point, Poison, Sleep (a slow handler) and Copies (1, or 2 for a
// duplicate send). Body(KeyField) is its body.
type Message = harness.Message

// Workload is the seeded set of messages and the order they are sent in.
type Workload = harness.Workload

// NewWorkload derives the workload from the seed and rates of c (which
// must have its defaults applied): a harness.Mix of c.Messages keys.
func NewWorkload(c Config) Workload {
	return harness.Mix{
		Messages:        c.Messages,
		KeyFormat:       "k-%06d",
		Seed:            c.Seed,
		DuplicateRate:   c.DuplicateRate,
		DuplicateSpread: c.DuplicateSpread,
		CrashRate:       c.CrashRate,
		CrashPoints:     CrashPoints,
		PoisonRate:      c.PoisonRate,
		MinPoison:       c.MinPoison,
		SlowRate:        c.SlowRate,
		Slow:            c.SlowFor,
	}.Workload()
}
