package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/internal/emailapi"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// These tests run each stage's own handler, with its own options, in the
// test kit (simulated queues, store and clock), the email API a fake on
// loopback.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// outbox is the notifications queue as the orders stage sees it.
type outbox struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
}

func (o *outbox) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("n")}, nil
}

// keys are the idempotency keys of the notifications sent, in order.
func (o *outbox) keys() []string {
	var k []string
	for _, in := range o.sent {
		k = append(k, aws.ToString(in.MessageAttributes[KeyAttribute].StringValue))
	}
	return k
}

func ordersKit(t *testing.T) (*lambdaidemtest.Kit, *outbox) {
	t.Helper()
	out := &outbox{}
	handle, opts := NewMessageHandler(Config{Stage: StageOrders, Notifications: "https://sqs.example/notifications"}, Deps{SQS: out, Logger: quiet})
	return lambdaidemtest.New(handle, opts...), out
}

func notifyKit(t *testing.T, keyed bool, fault func(string, int) emailapi.Fault) (*lambdaidemtest.Kit, *emailapi.Server) {
	t.Helper()
	api, err := emailapi.Start(emailapi.Config{Keyed: keyed, Fault: fault})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	handle, opts := NewMessageHandler(Config{Stage: StageNotify, EmailAPIKeyed: keyed}, Deps{Mailer: &EmailAPI{URL: api.URL(), Keyed: keyed}, Logger: quiet})
	return lambdaidemtest.New(handle, opts...), api
}

const order = `{"order_id":"o-1","email":"a@example.com"}`

// A crash after the send runs the order again and sends the notification
// again, with the same idempotency key.
func TestOrdersResendCarriesTheSameKey(t *testing.T) {
	k, out := ordersKit(t)
	k.CrashAfterEffect(order)
	keys := out.keys()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("notification keys %q, want two sends under one key", keys)
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

// The two stages in a row: the orders stage crashes after its send, so
// the notify stage gets the notification twice, under one key; it sends one
// email, whether the API takes keys or the stage runs at most once.
func TestChainOneEmailPerOrder(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "keyed API", false: "at most once"}[keyed], func(t *testing.T) {
			orders, out := ordersKit(t)
			orders.CrashAfterEffect(order)
			notify, api := notifyKit(t, keyed, nil)
			for _, in := range out.sent {
				notify.Send(aws.ToString(in.MessageBody), lambdaidemtest.Attr(KeyAttribute, aws.ToString(in.MessageAttributes[KeyAttribute].StringValue)))
			}
			notify.Run()
			if n := api.Emails("o-1"); n != 1 {
				t.Errorf("%d emails for o-1, want 1", n)
			}
			for _, k := range []*lambdaidemtest.Kit{orders, notify} {
				if err := k.Check(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// The email API sends the email and answers 504. With a key, the retry is
// answered as sent, with no second email; at most once, the notification
// is dead-lettered as outcome_unknown, for a person, and not sent again.
func TestEmailSentThen504(t *testing.T) {
	first504 := func(_ string, call int) emailapi.Fault {
		if call == 0 {
			return emailapi.SentThen504
		}
		return emailapi.None
	}
	const key = "k-1"
	body, _ := json.Marshal(Notification{OrderID: "o-1", Email: "a@example.com"})
	t.Run("keyed API", func(t *testing.T) {
		k, api := notifyKit(t, true, first504)
		k.Send(string(body), lambdaidemtest.Attr(KeyAttribute, key))
		k.Run()
		if n, s := api.Emails("o-1"), k.Status(key); n != 1 || s != lambdaidem.StatusCompleted {
			t.Errorf("%d emails, record %s; want 1, COMPLETED", n, s)
		}
		k.ExpectFailure(key) // the 504
		if err := k.Check(); err != nil {
			t.Error(err)
		}
	})
	t.Run("at most once", func(t *testing.T) {
		k, api := notifyKit(t, false, first504)
		k.Send(string(body), lambdaidemtest.Attr(KeyAttribute, key))
		k.Run()
		if n := api.Emails("o-1"); n != 1 {
			t.Errorf("%d emails, want 1", n)
		}
		dl := k.DeadLetters()
		if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonOutcomeUnknown {
			t.Errorf("dead letters %+v, want one outcome_unknown", dl)
		}
		k.ExpectDeadLetter(key, lambdaidem.ReasonOutcomeUnknown)
		if err := k.Check(); err != nil {
			t.Error(err)
		}
	})
}

// An answer that says nothing was sent (503) is retried, at most once too,
// and the email goes out once.
func TestEmailNotSentIsRetried(t *testing.T) {
	first503 := func(_ string, call int) emailapi.Fault {
		if call == 0 {
			return emailapi.NotSent503
		}
		return emailapi.None
	}
	body, _ := json.Marshal(Notification{OrderID: "o-1", Email: "a@example.com"})
	for _, keyed := range []bool{true, false} {
		k, api := notifyKit(t, keyed, first503)
		k.Send(string(body), lambdaidemtest.Attr(KeyAttribute, "k-1"))
		k.Run()
		if n, s := api.Emails("o-1"), k.Status("k-1"); n != 1 || s != lambdaidem.StatusCompleted {
			t.Errorf("keyed %v: %d emails, record %s; want 1, COMPLETED", keyed, n, s)
		}
		k.ExpectFailure("k-1")
		if err := k.Check(); err != nil {
			t.Error(err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	for _, c := range []struct {
		env map[string]string
		ok  bool
	}{
		{map[string]string{EnvStage: StageOrders, EnvIdempotencyTable: "t", EnvNotifications: "q"}, true},
		{map[string]string{EnvStage: StageNotify, EnvIdempotencyTable: "t", EnvEmailAPI: "http://x", EnvEmailAPIKeyed: "true"}, true},
		{map[string]string{EnvStage: StageOrders, EnvIdempotencyTable: "t"}, false},
		{map[string]string{EnvStage: "both", EnvIdempotencyTable: "t"}, false},
		{map[string]string{EnvStage: StageNotify, EnvIdempotencyTable: "t", EnvEmailAPI: "http://x", EnvEmailAPIKeyed: "yes"}, false},
	} {
		if _, err := ConfigFromEnv(func(k string) string { return c.env[k] }); (err == nil) != c.ok {
			t.Errorf("%v: %v", c.env, err)
		}
	}
}

// What the two safe pairings prevent: a stage that retries (it thinks the
// API takes keys) with an API that ignores the key sends the email twice
// after a 504 that hid a sent one.
func TestUnkeyedRetryRepeatsTheEmail(t *testing.T) {
	api, err := emailapi.Start(emailapi.Config{Fault: func(_ string, call int) emailapi.Fault {
		if call == 0 {
			return emailapi.SentThen504
		}
		return emailapi.None
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	handle, opts := NewMessageHandler(Config{Stage: StageNotify, EmailAPIKeyed: true}, Deps{Mailer: &EmailAPI{URL: api.URL(), Keyed: true}, Logger: quiet})
	k := lambdaidemtest.New(handle, opts...)
	body, _ := json.Marshal(Notification{OrderID: "o-1", Email: "a@example.com"})
	k.Send(string(body), lambdaidemtest.Attr(KeyAttribute, "k-1"))
	k.Run()
	if n := api.Emails("o-1"); n != 2 {
		t.Errorf("%d emails, want 2: the retry the ignored key could not stop", n)
	}
}

// mailbox is an email API in the test's process: it records each email it
// sends with lambdaidemtest.Effect, so the kit itself judges the repeats,
// and, keyed, sends one email per Idempotency-Key. An answer the kit loses
// (ErrorAfterEffect) comes back as a 504 would.
type mailbox struct {
	keyed bool
	seen  map[string]bool
}

func (m *mailbox) Send(ctx context.Context, n Notification, key string) error {
	if m.keyed {
		if m.seen[key] {
			return nil // a repeat of a key it answered: nothing sent
		}
		m.seen[key] = true
	}
	if err := lambdaidemtest.Effect(ctx, "email for "+n.OrderID); err != nil {
		return fmt.Errorf("%w: 504 Gateway Timeout: %w", ErrEmailAPI, err)
	}
	return nil
}

// The kit judges the email without a counter of the test's: sent and
// answered 504, or sent and then the environment died, the keyed API and
// the at-most-once stage send it once (Check passes). A stage that retries
// with an API that ignores the key sends it twice either way: after the
// 504 Check reports the second email; after the crash it allows it, the
// one repeat at least once permits for an attempt the kit abandoned.
func TestKitJudgesTheEmail(t *testing.T) {
	body, _ := json.Marshal(Notification{OrderID: "o-1", Email: "a@example.com"})
	for _, c := range []struct {
		name          string
		keyed, honour bool // the stage retries as for a keyed API; the API honours the key
		wantRepeat    bool
	}{
		{"keyed API", true, true, false},
		{"at most once", false, false, false},
		{"retried, the key ignored", true, false, true},
	} {
		for scenario, run := range map[string]func(*lambdaidemtest.Kit, ...lambdaidemtest.SendOption){
			"504 after sending":   func(k *lambdaidemtest.Kit, o ...lambdaidemtest.SendOption) { k.ErrorAfterEffect(string(body), o...) },
			"crash after sending": func(k *lambdaidemtest.Kit, o ...lambdaidemtest.SendOption) { k.CrashAfterEffect(string(body), o...) },
		} {
			t.Run(c.name+"/"+scenario, func(t *testing.T) {
				handle, opts := NewMessageHandler(Config{Stage: StageNotify, EmailAPIKeyed: c.keyed}, Deps{Mailer: &mailbox{keyed: c.honour, seen: map[string]bool{}}, Logger: quiet})
				k := lambdaidemtest.New(handle, opts...)
				run(k, lambdaidemtest.Attr(KeyAttribute, "k-1"))
				if n := len(k.Effects("k-1")); n == 0 {
					t.Fatal("no email at all")
				}
				if !c.keyed {
					k.ExpectDeadLetter("k-1", lambdaidem.ReasonOutcomeUnknown)
				}
				err := k.Check()
				want := c.wantRepeat && scenario == "504 after sending"
				if got := err != nil && strings.Contains(err.Error(), "email for o-1"); got != want {
					t.Errorf("Check reports a repeated email: %v, want %v (%d emails)\n%v", got, want, len(k.Effects("k-1")), err)
				}
			})
		}
	}
}
