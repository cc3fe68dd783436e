package main

import (
	"context"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// The tests run the handler under lambdaidem's kit: a simulated queue,
// Lambda's event source, an in-memory store, a dead-letter queue and a
// fake clock. Nothing sleeps, and every run is the same.

const (
	ada    = `{"user_id":"u-1","email":"ada@example.com","name":"Ada"}`
	grace  = `{"user_id":"u-2","email":"grace@example.com","name":"Grace"}`
	nobody = `{"user_id":"u-3","email":"not an address","name":"Nobody"}`
)

// fakeMailer is the mail provider in the tests. Like a provider that
// takes an idempotency key, it delivers one email per key.
type fakeMailer struct {
	now   func() time.Time
	busy  int         // the next busy Sends answer BusyError
	sends []time.Time // when Send was called, busy answers included
	keys  []string    // the key of every Send
	inbox []string    // the address of every email delivered
	seen  map[string]bool
}

func newFakeMailer(now func() time.Time) *fakeMailer {
	return &fakeMailer{now: now, seen: map[string]bool{}}
}

func (f *fakeMailer) Send(_ context.Context, key string, e Email) error {
	f.sends = append(f.sends, f.now())
	f.keys = append(f.keys, key)
	if f.busy > 0 {
		f.busy--
		return &BusyError{Wait: 20 * time.Second}
	}
	if !f.seen[key] {
		f.seen[key] = true
		f.inbox = append(f.inbox, e.To)
	}
	return nil
}

// newKit runs the handler, with the options it is deployed with, over a
// fake mailer on the kit's clock.
func newKit() (*lambdaidemtest.Kit, *fakeMailer) {
	var k *lambdaidemtest.Kit
	m := newFakeMailer(func() time.Time { return k.Now() })
	k = lambdaidemtest.New(handle(m), options()...)
	return k, m
}

// A duplicate, of any kind, sends one email.
func TestDuplicateSendsOneEmail(t *testing.T) {
	for name, duplicate := range map[string]func(*lambdaidemtest.Kit){
		"the producer sent it twice":      func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(ada) },
		"SQS delivered it twice at once":  func(k *lambdaidemtest.Kit) { k.DeliverTwice(ada) },
		"it came back while it still ran": func(k *lambdaidemtest.Kit) { k.RedeliverWhileRunning(ada) },
	} {
		t.Run(name, func(t *testing.T) {
			k, m := newKit()
			duplicate(k)
			if len(m.keys) != 1 || k.Runs("u-1") != 1 {
				t.Errorf("%d sends in %d runs, want one", len(m.keys), k.Runs("u-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A crash after the send, before lambdaidem recorded it, runs the handler
// again: the second send carries the same key, so the provider delivers
// one email. This is why the handler passes a key.
func TestCrashAfterTheSendResendsWithTheSameKey(t *testing.T) {
	k, m := newKit()
	k.CrashAfterEffect(ada)
	if k.Runs("u-1") != 2 || len(m.keys) != 2 || m.keys[0] != m.keys[1] {
		t.Errorf("%d runs sent with keys %q, want two runs with one key", k.Runs("u-1"), m.keys)
	}
	if len(m.inbox) != 1 || k.Status("u-1") != lambdaidem.StatusCompleted {
		t.Errorf("%d emails delivered, u-1 %s: want one, COMPLETED", len(m.inbox), k.Status("u-1"))
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

// An address that can never work goes to the dead-letter queue at once,
// with its reason, and nothing is sent.
func TestInvalidAddressIsDeadLettered(t *testing.T) {
	k, m := newKit()
	k.Poison(nobody)
	dl := k.DeadLetters()
	if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonPoison || k.Runs("u-3") != 1 || len(m.keys) != 0 {
		t.Errorf("dead letters %+v after %d runs and %d sends, want one poison copy after one run", dl, k.Runs("u-3"), len(m.keys))
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

// A busy provider's wait is honoured: the signup comes back 20 s later,
// sooner than the queue's visibility timeout, and is sent then.
func TestBusyProviderIsRetriedWhenItSaid(t *testing.T) {
	k, m := newKit()
	m.busy = 1
	k.ExpectFailure("u-1") // the first attempt fails: the provider said wait
	k.Send(ada)
	k.Run()
	if len(m.sends) != 2 || len(m.inbox) != 1 || k.Status("u-1") != lambdaidem.StatusCompleted {
		t.Fatalf("%d sends, %d delivered, u-1 %s: want two sends, one email, COMPLETED", len(m.sends), len(m.inbox), k.Status("u-1"))
	}
	if wait := m.sends[1].Sub(m.sends[0]); wait < 20*time.Second || wait >= k.Visibility {
		t.Errorf("retried %s after the busy answer, want 20 s or a little more (the visibility timeout is %s)", wait, k.Visibility)
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

// Thousands of seeded failures (crashes at every step, timeouts, store
// errors, duplicates, operators' redrives): no address ever receives two
// welcome emails, and the invalid one is dead-lettered.
func TestNoOneIsWelcomedTwice(t *testing.T) {
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Options:   options(),
		Messages:  []string{ada, grace, nobody},
		Scenarios: 1000,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			m := newFakeMailer(time.Now)
			return handle(m), lambdaidemtest.AtMostOnce(&m.inbox)
		},
		// The invalid address is dead-lettered as poison, or, when the
		// drawn store faults keep its record from saying so, as
		// max_attempts after the attempts they abandoned.
		Expect: func(k *lambdaidemtest.Kit) {
			k.ExpectDeadLetter("u-3", lambdaidem.ReasonPoison)
			k.ExpectDeadLetter("u-3", lambdaidem.ReasonMaxAttempts)
		},
	})
}
