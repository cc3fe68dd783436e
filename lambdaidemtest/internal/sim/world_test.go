package sim

import (
	"testing"
	"time"
)

// The simulated queue keeps SQS's rules: a stale receipt handle deletes
// nothing and cannot change visibility; a FIFO group waits while one of its
// messages is in flight; the redrive policy moves a message past
// maxReceiveCount.
func TestQueueRules(t *testing.T) {
	w := NewWorld(1)
	svc := NewSQS(w)

	q := svc.NewQueue("std", 10*time.Second)
	q.Send("a", nil, "", "")
	first := q.Receive(1, time.Second)[0]
	oldHandle := first.Handle
	w.At(2*time.Second, nil, func() {})
	w.Run(Epoch.Add(time.Hour))
	again := q.Receive(1, time.Second)
	if len(again) != 1 || again[0].Receives != 2 || again[0].Handle == oldHandle {
		t.Fatalf("redelivery after the visibility timeout: %+v", again)
	}
	q.Delete(oldHandle)
	if q.Len() != 1 {
		t.Fatal("a stale handle deleted the message")
	}
	if err := q.ChangeVisibility(oldHandle, time.Minute); err == nil {
		t.Fatal("a stale handle changed visibility")
	}
	q.Delete(again[0].Handle)
	if q.Len() != 0 {
		t.Fatal("the latest handle did not delete the message")
	}

	f := svc.NewQueue("f.fifo", 10*time.Second)
	f.Send("1", nil, "g", "d1")
	f.Send("2", nil, "g", "d2")
	f.Send("1", nil, "g", "d1") // deduplicated within five minutes
	f.Send("3", nil, "h", "d3")
	got := f.Receive(1, time.Minute)
	if len(got) != 1 || got[0].Body != "1" {
		t.Fatalf("first FIFO receive: %+v", got)
	}
	if next := f.Receive(10, time.Minute); len(next) != 1 || next[0].Body != "3" {
		t.Fatalf("group g must wait while 1 is in flight: %+v", next)
	}

	dlq := svc.NewQueue("dlq", time.Second)
	r := svc.NewQueue("r", time.Second)
	r.MaxReceive, r.DeadLetter = 1, dlq
	r.Send("x", nil, "", "")
	r.Receive(1, 0)
	if got := r.Receive(1, 0); len(got) != 0 || dlq.Len() != 1 || r.Len() != 0 {
		t.Fatalf("past maxReceiveCount the message must move: got %d, dlq %d, left %d", len(got), dlq.Len(), r.Len())
	}
}

// Killing a process unwinds its parked tasks (their deferred calls run)
// and its timers never fire; other tasks go on.
func TestKillEndsAProcess(t *testing.T) {
	w := NewWorld(1)
	p := &Process{Name: "p"}
	var unwound, fired, other bool
	w.Spawn("victim", p, func() {
		defer func() { unwound = true }()
		w.At(time.Minute, p, func() { fired = true })
		w.Sleep(time.Hour)
		t.Error("a killed task went on")
	})
	w.Spawn("bystander", nil, func() { w.Sleep(2 * time.Minute); other = true })
	w.At(time.Second, nil, func() { w.Kill(p) })
	w.Run(Epoch.Add(24 * time.Hour))
	w.Close()
	if !unwound || fired || !other {
		t.Fatalf("unwound=%v fired=%v other=%v", unwound, fired, other)
	}
}

// TestHTTPRequestsReachTheHandler guards the HTTP request stream itself:
// httpidem refuses keyed requests without a caller identity, and a stream
// of such requests would check nothing while every scenario passed.
func TestHTTPRequestsReachTheHandler(t *testing.T) {
	answered := 0
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := Draw(seed, nil, "wrap,nofaults")
		cfg.HTTP = true
		res := Run(seed, cfg, nil, false)
		if res.Failed() {
			t.Fatalf("seed %d: %v", seed, res.Violations)
		}
		answered += res.Answered
	}
	if answered == 0 {
		t.Fatal("no HTTP request was answered with a success in 20 scenarios")
	}
}

// TestRedrivePartialFailures runs redrive with its send and its delete
// failing half the time, over several operator runs, on poison messages:
// resets must apply (the path is walked) and every invariant hold,
// redrive termination and its per-record limit included.
func TestRedrivePartialFailures(t *testing.T) {
	resets := 0
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := Draw(seed, nil, "redrive")
		cfg.Poison, cfg.Sink, cfg.SinkFail = 0.5, true, 0
		cfg.Redrive, cfg.RedriveSendFail, cfg.RedriveDelFail = 3, 0.5, 0.5
		cfg.MaxRedrives = int(seed % 3)
		res := Run(seed, cfg, nil, false)
		if res.Failed() {
			t.Fatalf("seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'", seed, res.Violations, seed, cfg)
		}
		resets += res.Resets
	}
	if resets == 0 {
		t.Fatal("no redrive reset applied in 40 scenarios")
	}
}

// reach runs 40 seeds drawn with filter (every invariant must hold) and
// returns what sum counts over them: a guard that the draws a promise
// needs still reach its path.
func reach(t *testing.T, filter string, sum func(*Result) int) int {
	t.Helper()
	n := 0
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := Draw(seed, nil, filter)
		res := Run(seed, cfg, nil, false)
		if res.Failed() {
			t.Fatalf("seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'", seed, res.Violations, seed, cfg)
		}
		n += sum(res)
	}
	return n
}

// Forced operators revoke leases whose handlers still run, and with a
// heartbeat the store then refuses an extension: the path that tells a
// handler it lost its lease out of band is walked.
func TestForcedOperatorsRevokeLiveLeases(t *testing.T) {
	if n := reach(t, "force", func(r *Result) int { return r.Revoked }); n == 0 {
		t.Fatal("no operator revoked a live lease in 40 scenarios")
	}
	if n := reach(t, "force,heartbeat", func(r *Result) int { return r.Refused }); n == 0 {
		t.Fatal("no lease extension was refused in 40 scenarios with forced operators and heartbeats")
	}
}

// FIFO-heavy batches hold a group's later records back after one that
// was not acknowledged, so the FIFO order checks see both sides.
func TestOrderedGroupsStop(t *testing.T) {
	if n := reach(t, "ordered", func(r *Result) int { return r.GroupStops }); n == 0 {
		t.Fatal("no FIFO record was held back in 40 ordered scenarios")
	}
}

// Key conflicts reach the dead-letter queue, where the checker asks
// whose payload holds the key.
func TestConflictsAreDeadLettered(t *testing.T) {
	if n := reach(t, "conflict", func(r *Result) int { return r.Conflicts }); n == 0 {
		t.Fatal("no key conflict was dead-lettered in 40 conflict scenarios")
	}
}

// Every word of Filters is known to Draw, and an unknown one is refused.
func TestFilterWords(t *testing.T) {
	for _, f := range Filters {
		if err := CheckFilter(f.Name); err != nil {
			t.Error(err)
		}
	}
	if CheckFilter("fifo,nosuchword") == nil {
		t.Error("an unknown config word was accepted")
	}
}
