package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// The tests run the handler under lambdaidem's kit: a simulated queue,
// Lambda's event source, an in-memory store, a dead-letter queue and a
// fake clock. Nothing sleeps, and every run is the same. The fake mailer
// records each email it sends with lambdaidemtest.Effect, and Check
// reports an email sent more often than lambdaidem allows.

const (
	ada    = `{"user_id":"u-1","email":"ada@example.com","name":"Ada"}`
	grace  = `{"user_id":"u-2","email":"grace@example.com","name":"Grace"}`
	nobody = `{"user_id":"u-3","email":"not an address","name":"Nobody"}`
)

// fakeMailer is the mail provider in the tests. Like a provider that
// takes an idempotency key, it sends one email per key.
type fakeMailer struct {
	now   func() time.Time
	busy  int         // the next busy Sends answer BusyError
	calls []time.Time // when Send was called
	inbox []string    // the address of every email sent
	seen  map[string]bool
}

func newFakeMailer(now func() time.Time) *fakeMailer {
	return &fakeMailer{now: now, seen: map[string]bool{}}
}

func (f *fakeMailer) Send(ctx context.Context, key string, e Email) error {
	f.calls = append(f.calls, f.now())
	if f.busy > 0 {
		f.busy--
		return &BusyError{Wait: 20 * time.Second}
	}
	if f.seen[key] {
		return nil // a repeat of a key it sent: nothing sent again
	}
	f.seen[key] = true
	f.inbox = append(f.inbox, e.To)
	if err := lambdaidemtest.Effect(ctx, "welcome email to "+e.To); err != nil {
		return fmt.Errorf("504 Gateway Timeout: %w", err) // sent, and the answer lost
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
			k, _ := newKit()
			duplicate(k)
			if n := len(k.Effects("u-1")); n != 1 || k.Runs("u-1") != 1 {
				t.Errorf("%d emails in %d runs, want one", n, k.Runs("u-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// The email went out, then lambdaidem could not record it: the
// environment died, or the provider answered 504. The handler runs again
// with the same key, and the provider sends nothing more.
func TestSendRepeatedAfterTheEmailSendsOne(t *testing.T) {
	for name, scenario := range map[string]func(*lambdaidemtest.Kit){
		"a crash after the send": func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(ada) },
		"a 504 after the send":   func(k *lambdaidemtest.Kit) { k.ErrorAfterEffect(ada) },
	} {
		t.Run(name, func(t *testing.T) {
			k, m := newKit()
			scenario(k)
			if n := len(k.Effects("u-1")); k.Runs("u-1") != 2 || len(m.calls) != 2 || n != 1 {
				t.Errorf("%d runs, %d sends, %d emails: want the send repeated and one email", k.Runs("u-1"), len(m.calls), n)
			}
			if k.Status("u-1") != lambdaidem.StatusCompleted {
				t.Errorf("u-1 is %s, want COMPLETED", k.Status("u-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// An address that can never work goes to the dead-letter queue at once,
// with its reason, and nothing is sent.
func TestInvalidAddressIsDeadLettered(t *testing.T) {
	k, m := newKit()
	k.Poison(nobody)
	dl := k.DeadLetters()
	if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonPoison || k.Runs("u-3") != 1 || len(m.calls) != 0 {
		t.Errorf("dead letters %+v after %d runs and %d sends, want one poison copy after one run", dl, k.Runs("u-3"), len(m.calls))
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
	if len(m.calls) != 2 || len(k.Effects("u-1")) != 1 || k.Status("u-1") != lambdaidem.StatusCompleted {
		t.Fatalf("%d sends, %d emails, u-1 %s: want two sends, one email, COMPLETED", len(m.calls), len(k.Effects("u-1")), k.Status("u-1"))
	}
	if wait := m.calls[1].Sub(m.calls[0]); wait < 20*time.Second || wait >= k.Visibility {
		t.Errorf("retried %s after the busy answer, want 20 s or a little more (the visibility timeout is %s)", wait, k.Visibility)
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

// A thousand seeded scenarios of failures (crashes at every step,
// timeouts, lost answers, store errors, duplicates, operators' redrives):
// no address ever receives two welcome emails, and the invalid one is
// dead-lettered.
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
