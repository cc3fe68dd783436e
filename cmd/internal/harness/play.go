package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// Until is what ends a phase.
type Until int

// The ends of a phase.
const (
	// UntilDrained: the functions' queues hold no message (visible, in
	// flight or delayed) and no invocation holds a record.
	UntilDrained Until = iota
	// UntilCrashed: every key the phase sent was in an invocation that
	// crashed, or was processed without one. A crash set for an attempt
	// does not happen when that attempt ends before its handler runs (a
	// store call that timed out on a loaded machine, say); the key is then
	// processed on a later attempt, and waiting longer would show nothing.
	UntilCrashed
	// UntilDeleted: every message sent so far was deleted. It asks the
	// queue nothing, so a measurement does not load the emulator.
	UntilDeleted
)

// Phase is one wave of a scenario: what it sends, and what it waits for.
type Phase struct {
	// Name is the phase's short name, for progress lines (Harness.Phase).
	Name string
	// Text is printed when the phase starts; empty prints nothing.
	Text string
	// Sends lists the workload's messages to send, by index, one per send,
	// in order (Workload.Expand, or a Mix's Workload.Order). Each goes to
	// its message's function's queue, ten to a request.
	Sends []int
	// Until ends the phase once everything was sent. Default
	// UntilDrained.
	Until Until
	// Backlog, when set, is the most messages sent and not yet deleted:
	// the sender waits for room, as a steady producer would. It keeps the
	// pace up on an SQS emulator whose requests cost time in proportion to
	// the queue's depth (moto's do).
	Backlog int
	// Senders is the number of requests sent at once. Default 1, which
	// keeps the send order.
	Senders int
}

// Play runs the phases in turn: each is announced (Text), its messages
// sent and its end waited for. A phase with nothing to send is skipped.
// OnPhase, when set, is called before each phase is announced.
func (h *Harness) Play(ctx context.Context, w Workload, phases ...Phase) error {
	for _, p := range phases {
		if len(p.Sends) == 0 {
			continue
		}
		if h.OnPhase != nil {
			h.OnPhase(p)
		}
		h.phase.Store(p.Name)
		if p.Text != "" {
			h.Log.Printf("%s", p.Text)
		}
		if err := h.Send(ctx, w, p); err != nil {
			return err
		}
		if err := h.Wait(ctx, w, p); err != nil {
			return err
		}
	}
	return nil
}

// batch is up to ten sends to one queue.
type batch struct {
	queueURL string
	keyField string
	msgs     []Message
}

// Send sends a phase's messages through package producer (the key in its
// message attribute, as a user's producer sends it), ten to a request and
// a queue, Senders requests at once, keeping within Backlog. It gives up
// when the backlog sees no deletion for WaitTimeout: a stall, not a slow
// run.
func (h *Harness) Send(ctx context.Context, w Workload, p Phase) error {
	var batches []batch
	for _, i := range p.Sends {
		m := w.Messages[i]
		s, err := h.function(m.Function)
		if err != nil {
			return err
		}
		if n := len(batches); n == 0 || batches[n-1].queueURL != s.queueURL || len(batches[n-1].msgs) == producer.MaxBatch {
			batches = append(batches, batch{queueURL: s.queueURL, keyField: s.fn.KeyField})
		}
		b := &batches[len(batches)-1]
		b.msgs = append(b.msgs, m)
	}

	senders := max(p.Senders, 1)
	work := make(chan batch)
	errc := make(chan error, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if err := h.sendBatch(ctx, b); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	err := h.feed(ctx, batches, p.Backlog, work, errc)
	close(work)
	wg.Wait()
	close(errc)
	if err != nil {
		return err
	}
	return <-errc // nil when closed empty
}

// feed hands the batches to the senders, waiting for room in the backlog.
func (h *Harness) feed(ctx context.Context, batches []batch, backlog int, work chan<- batch, errc <-chan error) error {
	var tick *time.Ticker
	// handed counts the messages sent before this phase and those handed
	// to a sender since: a batch counts against the backlog from then.
	handed := h.Sent()
	lastDeleted, progressAt := h.Obs.Deleted(), time.Now()
	for _, b := range batches {
		for backlog > 0 {
			deleted := h.Obs.Deleted()
			if handed+int64(len(b.msgs))-deleted <= int64(backlog) {
				break
			}
			if deleted != lastDeleted {
				lastDeleted, progressAt = deleted, time.Now()
			} else if time.Since(progressAt) > h.cfg.WaitTimeout {
				return fmt.Errorf("sending: no message deleted for %s with %d sent and not deleted", h.cfg.WaitTimeout, handed-deleted)
			}
			if tick == nil {
				tick = time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("sending: %w", context.Cause(ctx))
			case err := <-errc:
				return err
			case <-tick.C:
			}
		}
		select {
		case work <- b:
			handed += int64(len(b.msgs))
		case err := <-errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("sending: %w", context.Cause(ctx))
		}
	}
	return nil
}

func (h *Harness) sendBatch(ctx context.Context, b batch) error {
	msgs := make([]producer.Message, len(b.msgs))
	for i, m := range b.msgs {
		msgs[i] = producer.Message{Key: m.Key, Body: m.Body(b.keyField), GroupID: m.GroupID}
	}
	results, err := producer.New(h.SQS, b.queueURL).SendBatch(ctx, msgs)
	for i, r := range results {
		if r.Err == nil {
			h.Obs.sent(r.MessageID, b.msgs[i].Key)
			h.sentMsgs.Add(1)
		}
	}
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Wait waits for the phase's end, as long as the run makes progress
// (WaitFor).
func (h *Harness) Wait(ctx context.Context, w Workload, p Phase) error {
	switch p.Until {
	case UntilCrashed:
		var keys []string
		for _, i := range p.Sends {
			keys = append(keys, w.Messages[i].Key)
		}
		return h.WaitFor(ctx, "the crash", func(context.Context) (bool, error) {
			for _, k := range keys {
				if !h.Obs.Crashed(k) && !h.Obs.Processed(k) {
					return false, nil
				}
			}
			return true, nil
		})
	case UntilDeleted:
		return h.WaitFor(ctx, "every message to be deleted", func(context.Context) (bool, error) {
			return h.Obs.Deleted() >= h.Sent(), nil
		})
	default:
		return h.WaitDrained(ctx)
	}
}

// ErrWaitTimeout is wrapped by a wait that gave up: the run made no
// progress for Config.WaitTimeout.
var ErrWaitTimeout = errors.New("harness: wait timed out")

// WaitFor checks cond until it holds or ctx ends: at once, after every
// invocation, and four times a second. It waits as long as the run makes
// progress (Observer.Progress moves), however slowly a loaded machine runs
// it, and gives up only when nothing has moved for WaitTimeout: a stall,
// not a slow run.
func (h *Harness) WaitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last, movedAt := h.Obs.Progress(), time.Now()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if p := h.Obs.Progress(); p != last {
			last, movedAt = p, time.Now()
		} else if time.Since(movedAt) >= h.cfg.WaitTimeout {
			return fmt.Errorf("waiting for %s: %w: nothing moved for %s (%d received, %d in flight)",
				what, ErrWaitTimeout, h.cfg.WaitTimeout, h.Obs.Received(), h.Obs.InFlight())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-h.Obs.Changed():
		case <-tick.C:
		}
	}
}

// WaitDrained waits until the functions' queues hold no message (visible,
// in flight or delayed) and no invocation holds a record. On a timeout the
// error says how many were left.
func (h *Harness) WaitDrained(ctx context.Context) error {
	err := h.WaitFor(ctx, "the queue to drain", func(ctx context.Context) (bool, error) {
		if h.Obs.InFlight() > 0 {
			return false, nil
		}
		n, err := h.QueueDepth(ctx)
		return err == nil && n == 0 && h.Obs.InFlight() == 0, err
	})
	if errors.Is(err, ErrWaitTimeout) {
		n, _ := h.QueueDepth(ctx)
		err = fmt.Errorf("%w (%d messages left, %d in flight)", err, n, h.Obs.InFlight())
	}
	return err
}

// QueueDepth is the number of messages in the functions' queues, visible
// or not.
func (h *Harness) QueueDepth(ctx context.Context) (int, error) {
	total := 0
	for _, s := range h.funcs {
		n, err := localrun.QueueDepth(ctx, h.SQS, s.queueURL)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
