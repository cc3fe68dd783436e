package main

import (
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

// The demo is one scenario on the shared harness (cmd/internal/harness): the
// orders example's bootstrap as two functions, a scripted workload sent in
// three phases, and a summary of what the run left behind. This file is
// the scenario; run.go runs it, narrate.go tells it as it goes, summary.go
// judges what it left behind.

// Mode is the orders function's EFFECT_MODE: the demo runs one function
// in each.
type Mode string

// The two functions of the demo, one per effect mode of examples/orders.
const (
	// ModePlain: the effect is its own PutItem, then the completion.
	ModePlain Mode = "plain"
	// ModeTransactional: the effect commits with the completion in one
	// TransactWriteItems.
	ModeTransactional Mode = "transactional"
)

// Modes lists the modes in the order the summary shows them.
var Modes = []Mode{ModePlain, ModeTransactional}

// Namespace is the idempotency namespace of the plain function (the
// orders example's default); NamespaceTransactional that of the
// transactional one. The demo reads the records back under them.
const (
	Namespace              = "orders"
	NamespaceTransactional = "orders-tx"
)

// function is the harness function of each mode: the orders example with
// its EFFECT_MODE and namespace, on a queue of its own with a short
// visibility timeout (so redeliveries happen within the run) and a
// redrive to the shared DLQ, writing to an effects table of its own. The
// plain function runs several processes; the transactional one, with far
// fewer orders, one.
func function(m Mode, opts Options) harness.Function {
	f := harness.Function{
		Name:        functionName[m],
		KeyField:    harness.OrdersKeyField,
		Env:         []string{"IDEMPOTENCY_NAMESPACE=" + namespaceOf(m), "EFFECT_MODE=" + string(m)},
		Effects:     true,
		Visibility:  opts.Visibility,
		MaxReceives: maxReceiveCount,
		// The demo counts outcomes from the library's one line per record;
		// "processed" and "duplicate" are logged at debug.
		Debug:           true,
		BatchSize:       opts.BatchSize,
		BatchingWindow:  opts.BatchingWindow,
		MaxConcurrency:  opts.MaxConcurrency,
		FunctionTimeout: opts.FunctionTimeout,
		PollWait:        2 * time.Second,
	}
	if m == ModeTransactional {
		f.Suffix, f.MaxConcurrency = "-tx", 1
	}
	return f
}

// functionName is the function of each mode (AWS_LAMBDA_FUNCTION_NAME).
var functionName = map[Mode]string{ModePlain: "orders", ModeTransactional: "orders-tx"}

// modeOf is the mode of the function a message goes to.
func modeOf(m harness.Message) Mode {
	if m.Function == functionName[ModeTransactional] {
		return ModeTransactional
	}
	return ModePlain
}

// namespaceOf returns the namespace of a mode's function.
func namespaceOf(m Mode) string {
	if m == ModeTransactional {
		return NamespaceTransactional
	}
	return Namespace
}

// maxReceiveCount is the source queues' redrive threshold: well above the
// library's default of 5 attempts, because deliveries that the library
// holds back (in progress) count as receives too. SQS's redrive is only the
// backstop; the library dead-letters with a reason first.
const maxReceiveCount = 10

// Scenario names what an order of the workload is there to show.
type Scenario string

// The scenarios of the scripted workload.
const (
	// ScenarioPlain: an order sent once.
	ScenarioPlain Scenario = "plain"
	// ScenarioDuplicate: an order the producer sends more than once, each
	// copy a new SQS message with its own message ID.
	ScenarioDuplicate Scenario = "duplicate"
	// ScenarioSlow: a handler that runs longer than the queue's visibility
	// timeout, so SQS delivers the message again while the first attempt
	// still runs.
	ScenarioSlow Scenario = "slow"
	// ScenarioPoison: a message that can never succeed.
	ScenarioPoison Scenario = "poison"
	// ScenarioRetry: a handler that fails twice, then succeeds.
	ScenarioRetry Scenario = "retry"
	// ScenarioCrash: the process exits in the middle of the handler, before
	// the effect, on the first attempt.
	ScenarioCrash Scenario = "crash"
	// ScenarioCrashAfter: the process exits after the effect and before the
	// completion is recorded, on the first attempt. Only the transactional
	// function gets it: in plain mode it repeats the effect by design.
	ScenarioCrashAfter Scenario = "crash_after"
)

// Scenarios lists the scenarios in the order the summary shows them.
var Scenarios = []Scenario{ScenarioPlain, ScenarioDuplicate, ScenarioSlow, ScenarioPoison, ScenarioRetry, ScenarioCrash, ScenarioCrashAfter}

// TransactionalOrders is how many ordinary orders the transactional
// function gets besides its crash: enough for duplicates to race.
const TransactionalOrders = 8

// NewWorkload returns, for the plain function, plain orders numbered
// 1..plain and the four special orders, and, for the transactional
// function, TransactionalOrders orders and one that crashes after the
// effect. Order i is sent three times when i is a multiple of 12 (two
// copies at once and one late), twice when a multiple of 5 (both at once),
// and once otherwise; transactional order i twice at once when i is even.
// slow is how long the slow order's handler sleeps. Everything is fixed:
// the same call gives the same workload.
func NewWorkload(plain int, slow time.Duration) harness.Workload {
	var w harness.Workload
	order := func(id string, s Scenario, m Mode) harness.Message {
		return harness.Message{Key: id, Scenario: string(s), Function: function(m, Options{}).Name, Copies: 1}
	}
	for i := 1; i <= plain; i++ {
		o := order(fmt.Sprintf("o-%03d", i), ScenarioPlain, ModePlain)
		switch {
		case i%12 == 0:
			o.Scenario, o.Copies, o.LateCopies = string(ScenarioDuplicate), 2, 1
		case i%5 == 0:
			o.Scenario, o.Copies = string(ScenarioDuplicate), 2
		}
		w.Messages = append(w.Messages, o)
	}
	slowOrder := order("o-slow", ScenarioSlow, ModePlain)
	slowOrder.Sleep = slow
	poison := order("o-poison", ScenarioPoison, ModePlain)
	poison.Poison = true
	retry := order("o-retry", ScenarioRetry, ModePlain)
	retry.FailTimes = 2
	crash := order("o-crash", ScenarioCrash, ModePlain)
	crash.Crash = "before_effect"
	w.Messages = append(w.Messages, slowOrder, poison, retry, crash)
	for i := 1; i <= TransactionalOrders; i++ {
		o := order(fmt.Sprintf("t-%03d", i), ScenarioPlain, ModeTransactional)
		if i%2 == 0 {
			o.Scenario, o.Copies = string(ScenarioDuplicate), 2
		}
		w.Messages = append(w.Messages, o)
	}
	txCrash := order("t-crash", ScenarioCrashAfter, ModeTransactional)
	txCrash.Crash = "after_effect"
	return harness.Workload{Messages: append(w.Messages, txCrash)}
}

// phases sends the workload in three phases, each waiting for its end.
func phases(w harness.Workload) []harness.Phase {
	crash := w.Expand(func(m harness.Message) int { return ifThen(m.Crash != "", m.Copies) })
	main := w.Expand(func(m harness.Message) int { return ifThen(m.Crash == "", m.Copies) })
	late := w.Expand(func(m harness.Message) int { return m.LateCopies })
	return []harness.Phase{{
		// The crashes go first, each alone on its function: a process
		// exit takes down every record of its batch, and in plain mode a
		// batch mate that had already written its effect but not
		// recorded completion would run again. That is the
		// crash-after-effect case, which only transactional completion
		// prevents: the plain function crashes before the effect, the
		// transactional one after it.
		Name: "crash",
		Text: fmt.Sprintf("phase 1: the plain function exits before the effect (%d order), the transactional one after the effect and before completion (%d order)",
			len(w.Where(is(ScenarioCrash))), len(w.Where(is(ScenarioCrashAfter)))),
		Sends: crash,
		Until: harness.UntilCrashed,
	}, {
		Name: "main",
		Text: fmt.Sprintf("phase 2: %d orders, producer duplicates sent back to back, a slow, a poison and a flaky order (plain); duplicates (transactional)",
			len(w.Where(func(m harness.Message) bool { return m.Crash == "" }))),
		Sends: main,
	}, {
		Name:  "late",
		Text:  fmt.Sprintf("phase 3: %d late producer retries of orders already done", len(late)),
		Sends: late,
	}}
}

func is(s Scenario) func(harness.Message) bool {
	return func(m harness.Message) bool { return m.Scenario == string(s) }
}

func ifThen(cond bool, n int) int {
	if cond {
		return n
	}
	return 0
}
