package lambdaidemtest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// DeliverTwice is SQS delivering one message twice (at-least-once
// delivery): two receives of the same message ID, with different receipt
// handles, handed to two execution environments at the same moment. The
// handler should run once; the other delivery is a duplicate, or waits for
// the first and then is one.
func (k *Kit) DeliverTwice(body string, opts ...SendOption) {
	m := k.send(body, opts)
	if m == nil {
		k.Run()
		return
	}
	k.run(func() {
		for range 2 {
			k.deliverAt(0, m)
		}
	})
}

// deliverAt hands m to a fresh execution environment after d, as a receive
// that SQS repeats while the message is in flight.
func (k *Kit) deliverAt(d time.Duration, m *sim.Message) {
	w := k.w
	q := k.std
	if m.GroupID != "" {
		q = k.fifo
	}
	es := k.sources[q]
	deliver := func() {
		w.Spawn("delivery", nil, func() {
			if q.Redeliver(m, q.Visibility) != nil {
				es.Deliver(k.function(), []*sim.Message{m})
			}
		})
	}
	if d == 0 {
		deliver()
		return
	}
	w.At(d, nil, deliver)
}

// ProducerDuplicate is a producer sending the same body twice (a retry
// after a timeout): two messages with two message IDs (and, on a FIFO
// queue, two deduplication IDs, so SQS keeps both). With a key taken from
// the body, the handler should run once.
func (k *Kit) ProducerDuplicate(body string, opts ...SendOption) {
	k.send(body, opts)
	k.dedups++
	k.send(body, append(opts[:len(opts):len(opts)], Dedup("producer-retry-"+strconv.Itoa(k.dedups))))
	k.Run()
}

// RedeliverWhileRunning is a message coming back after its visibility
// timeout while the first attempt still runs (a queue whose visibility
// timeout is shorter than the function's): the first run takes half the
// function timeout, the visibility timeout is a quarter of it, and a second
// execution environment receives the message in between. The second
// delivery must not run the handler while the first holds the lease.
func (k *Kit) RedeliverWhileRunning(body string, opts ...SendOption) {
	m := k.send(body, opts)
	if m == nil {
		k.Run()
		return
	}
	k.plans[m.ID] = &plan{pause: k.Timeout / 2}
	vis, pollers := k.Visibility, k.Pollers
	k.Visibility, k.Pollers = k.Timeout/4, max(k.Pollers, 2)
	k.Run()
	k.Visibility, k.Pollers = vis, pollers
}

// CrashAfterEffect is the execution environment dying after the handler
// returned, before the decorator recorded the completion (a timeout, an
// out-of-memory kill). The lease runs out, the message comes back after
// the visibility timeout, and the next delivery takes the key over and runs
// the handler again: whatever the first run did, it must not do twice.
func (k *Kit) CrashAfterEffect(body string, opts ...SendOption) {
	m := k.send(body, opts)
	if m != nil {
		k.plans[m.ID] = &plan{crash: true}
	}
	k.Run()
}

// TakeoverFromPaused is an instance pausing (a long garbage collection, a
// frozen execution environment) after it claimed the key and before its
// handler runs, for longer than its lease. The lease is a third of the
// function timeout, as when a heartbeat keeps a short lease alive and the
// pause stops it. Another delivery takes the lease over and runs the
// handler; then the paused instance wakes and runs the handler too, with
// its context already ended. The handler must notice (ctx.Err, or a fence
// on its own writes), or its effect happens twice.
func (k *Kit) TakeoverFromPaused(body string, opts ...SendOption) {
	k.outlivedLease(body, opts, func(lease time.Duration) *plan { return &plan{pause: 2 * lease} })
}

// LeaseLostBeforeCompletion is an instance pausing after the handler
// returned and before the decorator records the completion, for longer
// than its lease (a third of the function timeout, as a heartbeat keeps).
// Another delivery takes the key over and runs the handler; then the
// paused instance wakes and its completion is refused (the lease is
// lost). An effect the handler made itself has happened twice, the window
// docs/design.md describes; an effect committed with the completion
// (lambdaidem.AddCompletionWrite) happens once, as the stale completion's
// writes never apply.
func (k *Kit) LeaseLostBeforeCompletion(body string, opts ...SendOption) {
	k.outlivedLease(body, opts, func(lease time.Duration) *plan { return &plan{pauseAfter: 2 * lease} })
}

// outlivedLease sends body and delivers it under a lease of a third of the
// function timeout, paused as pause plans for twice that lease, and
// delivers it again once the lease and the grace have run out.
func (k *Kit) outlivedLease(body string, opts []SendOption, pause func(lease time.Duration) *plan) {
	m := k.send(body, opts)
	if m == nil {
		k.Run()
		return
	}
	lease := k.Timeout / 3
	k.plans[m.ID] = pause(lease)
	k.extra = []lambdaidem.Option{lambdaidem.WithLease(lease), lambdaidem.WithGrace(lease / 10)}
	k.run(func() { k.deliverAt(lease+lease/4, m) })
}

// Poison sends a message the handler cannot process (it returns
// lambdaidem.Poison, or fails until the decorator's max attempts, or the
// decorator refuses the body as malformed or without a key) and delivers
// it until it lands in the dead-letter queue with a reason; read it with
// DeadLetters.
//
// Poison declares what it sends: Check accepts the message's dead-letter
// copy when its reason says the message can never succeed (poison,
// max_attempts, malformed_body, missing_key), with the handler's failures
// that led to it, and reports the message if no copy of it reached the
// dead-letter queue. A copy with another reason is reported as
// undeclared, and so is a max_attempts copy after failures the kit itself
// caused (a completion write its store cannot commit). ExpectDeadLetter
// still holds the test to one reason.
func (k *Kit) Poison(body string, opts ...SendOption) {
	if m := k.send(body, opts); m != nil {
		k.expect.poisoned[m.ID] = body
	}
	k.Run()
}

// StopGroup sends bodies, in order, to one message group of the kit's FIFO
// queue and delivers them. When the handler fails one of them, the rest of
// the group must wait: RunOrder shows they did not run before it was
// done (or dead-lettered).
func (k *Kit) StopGroup(group string, bodies ...string) {
	for _, b := range bodies {
		k.send(b, []SendOption{Group(group)})
	}
	k.Run()
}

// Redrive is an operator sending the dead-letter queue's copies back to
// their queues (sqsqueue.Redrive, with the store's conditional reset of
// each key), and Lambda delivering them again. It returns what the redrive
// reported.
func (k *Kit) Redrive() (sqsqueue.RedriveSummary, error) {
	resetter, ok := k.base.(idemstore.DeadLetterResetter)
	if !ok {
		return sqsqueue.RedriveSummary{}, fmt.Errorf("lambdaidemtest: the kit's store (%T) cannot reset dead-lettered records (idemstore.DeadLetterResetter), so a redrive would skip every copy", k.base)
	}
	urls := k.svc.QueueURLs()
	st, err := sqsqueue.Redrive(context.Background(), sqsqueue.RedriveOptions{
		Client:             k.svc,
		DeadLetterQueueURL: k.dlq.URL,
		SourceQueues:       []string{k.std.ARN, k.fifo.ARN},
		QueueURLs:          urls,
		WaitTime:           -1,
		Resetter:           countingResetter{resetter, k},
		Now:                k.w.Now,
	})
	k.lastSend = k.w.Now()
	k.Run()
	return st, err
}
