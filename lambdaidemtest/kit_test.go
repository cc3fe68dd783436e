package lambdaidemtest_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// careless charges every time it runs: it neither checks a ledger nor
// looks at its context.
func careless(charges *[]string) lambdaidem.MessageHandler {
	return func(_ context.Context, msg events.SQSMessage) error {
		*charges = append(*charges, msg.Body)
		return nil
	}
}

var byOrder = lambdaidem.WithKeyJSONField("order")

// Each scenario either protects even a careless handler (the library's
// part) or exposes it (the handler's part): the kit must show both.
func TestScenariosBite(t *testing.T) {
	const body = `{"order":"o-1"}`
	for _, tc := range []struct {
		name    string
		run     func(*lambdaidemtest.Kit)
		charges int
	}{
		{"twice", func(k *lambdaidemtest.Kit) { k.DeliverTwice(body) }, 1},
		{"producer", func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(body) }, 1},
		{"running", func(k *lambdaidemtest.Kit) { k.RedeliverWhileRunning(body) }, 1},
		{"crash", func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(body) }, 2},
		{"paused", func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(body) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var charges []string
			k := lambdaidemtest.New(careless(&charges), byOrder)
			k.SetTrace(true)
			tc.run(k)
			if len(charges) != tc.charges || k.Runs("o-1") != tc.charges {
				t.Errorf("%d charges in %d runs, want %d\n%s", len(charges), k.Runs("o-1"), tc.charges, k.Trace())
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
			if k.Queued() != 0 || k.Status("o-1") != lambdaidem.StatusCompleted {
				t.Errorf("%d messages left, o-1 is %q", k.Queued(), k.Status("o-1"))
			}
		})
	}
}

func TestExplorerFindsAndReplays(t *testing.T) {
	x := lambdaidemtest.Exploration{
		Options:  []lambdaidem.Option{byOrder},
		Messages: []string{`{"order":"o-1"}`, `{"order":"o-2"}`},
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			var charges []string
			return careless(&charges), lambdaidemtest.AtMostOnce(&charges)
		},
	}
	f := x.Search()
	if f == nil {
		t.Fatal("a handler that charges on every run passed the exploration")
	}
	again := lambdaidemtest.Exploration{Options: x.Options, Messages: x.Messages, Setup: x.Setup, Seed: f.Seed, Scenarios: 1}.Search()
	if again == nil || again.Error() != f.Error() {
		t.Fatalf("seed %d did not replay exactly:\n%v\nthen:\n%v", f.Seed, f, again)
	}
	if len(f.Problems) == 0 || f.Trace == "" {
		t.Errorf("failure without problems or trace: %v", f)
	}
}

func TestFixtures(t *testing.T) {
	m := lambdaidemtest.Message(`{"a":1}`, lambdaidemtest.WithGroup("g"), lambdaidemtest.WithReceiveCount(3),
		lambdaidemtest.WithAttribute("tenant", "acme"), lambdaidemtest.WithBinaryAttribute("sig", []byte{1, 2}))
	sum := md5.Sum([]byte(m.Body))
	switch {
	case m.Md5OfBody != hex.EncodeToString(sum[:]):
		t.Errorf("md5 of body %s", m.Md5OfBody)
	case len(m.Md5OfMessageAttributes) != 32:
		t.Errorf("md5 of attributes %q", m.Md5OfMessageAttributes)
	case m.Attributes["MessageGroupId"] != "g" || m.Attributes["MessageDeduplicationId"] == "" || m.Attributes["ApproximateReceiveCount"] != "3":
		t.Errorf("attributes %v", m.Attributes)
	case m.EventSourceARN != "arn:aws:sqs:us-east-1:123456789012:queue.fifo" || m.EventSource != "aws:sqs":
		t.Errorf("source %s %s", m.EventSource, m.EventSourceARN)
	}
	var sns struct{ Type, Message, TopicArn string }
	if err := json.Unmarshal([]byte(lambdaidemtest.SNSBody("orders", "hi", map[string]string{"k": "v"})), &sns); err != nil ||
		sns.Type != "Notification" || sns.Message != "hi" || sns.TopicArn != "arn:aws:sns:us-east-1:123456789012:orders" {
		t.Errorf("SNS body %+v (%v)", sns, err)
	}
	var eb struct {
		Source     string            `json:"source"`
		DetailType string            `json:"detail-type"`
		Detail     map[string]string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(lambdaidemtest.EventBridgeBody("shop", "OrderPlaced", map[string]string{"order": "o-1"})), &eb); err != nil ||
		eb.Source != "shop" || eb.DetailType != "OrderPlaced" || eb.Detail["order"] != "o-1" {
		t.Errorf("EventBridge body %+v (%v)", eb, err)
	}
	r := lambdaidemtest.HTTPRequest("POST", "/payments", "{}", map[string]string{"Idempotency-Key": "k-1"})
	if r.Headers["idempotency-key"] != "k-1" || r.RouteKey != "POST /payments" || r.RequestContext.HTTP.Method != "POST" || r.Version != "2.0" {
		t.Errorf("HTTP request %+v", r)
	}
	// The decorator takes a fixture event as it takes Lambda's.
	var charges []string
	h := lambdaidem.SQS(memstore.New(), careless(&charges), byOrder)
	o := lambdaidemtest.Message(`{"order":"o-9"}`)
	resp, err := h(context.Background(), lambdaidemtest.Event(o, o))
	if err != nil || len(resp.BatchItemFailures) != 0 || len(charges) != 1 {
		t.Errorf("fixture event: %v %v, %d charges", resp, err, len(charges))
	}
}

// On a FIFO queue the explorer keeps each group's order: a handler that
// appends each message's seq to its group's log sees them ascending.
func TestExplorerFIFOKeepsGroupOrder(t *testing.T) {
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Options:   []lambdaidem.Option{lambdaidem.WithKeyJSONField("id")},
		Messages:  []string{`{"id":"a1","g":"a","seq":1}`, `{"id":"a2","g":"a","seq":2}`, `{"id":"b1","g":"b","seq":1}`, `{"id":"a3","g":"a","seq":3}`},
		GroupOf:   func(body string) string { return body[strings.Index(body, `"g":"`)+5:][:1] },
		Scenarios: 300,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			logs := map[string][]int{}
			return func(_ context.Context, msg events.SQSMessage) error {
					var m struct {
						G   string
						Seq int
					}
					if err := json.Unmarshal([]byte(msg.Body), &m); err != nil {
						return lambdaidem.Poison(err)
					}
					if l := logs[m.G]; !slices.Contains(l, m.Seq) {
						logs[m.G] = append(l, m.Seq)
					}
					return nil
				}, func() error {
					for g, l := range logs {
						if !slices.IsSorted(l) {
							return fmt.Errorf("group %s ran out of order: %v", g, l)
						}
					}
					return nil
				}
		},
	})
}

// Check reports what the test did not declare, accepts what it did, and
// reports a declared dead letter that never happened.
func TestCheckHoldsToDeclarations(t *testing.T) {
	flaky := func(fails map[string]int) lambdaidem.MessageHandler {
		return func(_ context.Context, msg events.SQSMessage) error {
			var o struct{ Order string }
			_ = json.Unmarshal([]byte(msg.Body), &o)
			if fails[o.Order] > 0 {
				fails[o.Order]--
				return fmt.Errorf("declined, %d more to come", fails[o.Order])
			}
			return nil
		}
	}
	// Send and Run, not Poison, which declares the dead letter of what it
	// sends.
	deliver := func(k *lambdaidemtest.Kit, body string) { k.Send(body); k.Run() }
	for _, tc := range []struct {
		name    string
		run     func(k *lambdaidemtest.Kit)
		declare func(k *lambdaidemtest.Kit)
		report  string // what Check says before the declaration
	}{
		{"a failure that was retried", func(k *lambdaidemtest.Kit) { deliver(k, `{"order":"o-1"}`) },
			func(k *lambdaidemtest.Kit) { k.ExpectFailure("o-1") },
			`undeclared failure: the handler failed for key "o-1" (message m-1, attempt 1; 2 failure(s) in all): declined, 1 more to come; if the test means it, declare it with ExpectFailure("o-1")`},
		{"a dead letter", func(k *lambdaidemtest.Kit) { deliver(k, `{"order":"o-2"}`) },
			func(k *lambdaidemtest.Kit) { k.ExpectDeadLetter("o-2", lambdaidem.ReasonMaxAttempts) },
			`undeclared dead letter: message m-1 (key "o-2") went to the dead-letter queue as max_attempts after 3 attempt(s)`},
		{"a message the queue's redrive policy moved", func(k *lambdaidemtest.Kit) { k.MaxReceive = 2; deliver(k, `{"order":"o-2"}`) },
			func(k *lambdaidemtest.Kit) { k.ExpectUnfinished("o-2"); k.ExpectFailure("o-2") },
			`undeclared unfinished key "o-2": the queue's redrive policy (MaxReceive) moved its message to the queue's own dead-letter queue`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := lambdaidemtest.New(flaky(map[string]int{"o-1": 2, "o-2": 99}), byOrder, lambdaidem.WithMaxAttempts(3))
			tc.run(k)
			err := k.Check()
			if err == nil || !strings.Contains(err.Error(), tc.report) {
				t.Fatalf("Check before the declaration: %v\nwant it to say: %s", err, tc.report)
			}
			tc.declare(k)
			if err := k.Check(); err != nil {
				t.Errorf("Check after the declaration: %v", err)
			}
		})
	}
	t.Run("a declared dead letter that never happened", func(t *testing.T) {
		k := lambdaidemtest.New(flaky(nil), byOrder)
		k.ExpectDeadLetter("o-1", lambdaidem.ReasonPoison)
		deliver(k, `{"order":"o-1"}`)
		if err := k.Check(); err == nil || !strings.Contains(err.Error(), `expected dead letter missing: ExpectDeadLetter("o-1", "poison")`) {
			t.Errorf("Check: %v", err)
		}
	})
}

// Poison declares the dead letter of the message it sends, whichever
// reason says the message can never succeed, and reports the message when
// it was not dead-lettered; an explicit ExpectDeadLetter still holds the
// test to its reason.
func TestPoisonDeclaresWhatItSends(t *testing.T) {
	handler := func(_ context.Context, msg events.SQSMessage) error {
		var o struct{ Order, Do string }
		_ = json.Unmarshal([]byte(msg.Body), &o)
		switch o.Do {
		case "refuse":
			return lambdaidem.Poison(fmt.Errorf("order %s refused", o.Order))
		case "fail":
			return fmt.Errorf("order %s failed", o.Order)
		}
		return nil
	}
	for _, tc := range []struct {
		name, body string
		reason     lambdaidem.Reason
	}{
		{"the handler refuses it", `{"order":"o-1","do":"refuse"}`, lambdaidem.ReasonPoison},
		{"the handler fails until max attempts", `{"order":"o-1","do":"fail"}`, lambdaidem.ReasonMaxAttempts},
		{"the body is not JSON", `{"order":`, lambdaidem.ReasonMalformedBody},
		{"the body has no key", `{"do":"refuse"}`, lambdaidem.ReasonMissingKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := lambdaidemtest.New(handler, byOrder, lambdaidem.WithMaxAttempts(3))
			k.Poison(tc.body)
			if dl := k.DeadLetters(); len(dl) != 1 || dl[0].Reason != tc.reason {
				t.Fatalf("dead letters %+v, want one %s copy", dl, tc.reason)
			}
			if err := k.Check(); err != nil {
				t.Errorf("Check after Poison, with nothing declared: %v", err)
			}
		})
	}
	t.Run("a message that was not dead-lettered", func(t *testing.T) {
		k := lambdaidemtest.New(handler, byOrder)
		k.Poison(`{"order":"o-2","do":"nothing"}`)
		want := `poison message not dead-lettered: Poison sent message m-1 ({"order":"o-2","do":"nothing"}), and no copy of it went to the dead-letter queue (its key's outcomes: [processed])`
		if err := k.Check(); err == nil || err.Error() != want {
			t.Errorf("Check: %v\nwant: %s", err, want)
		}
	})
	t.Run("an explicit declaration of another reason", func(t *testing.T) {
		k := lambdaidemtest.New(handler, byOrder, lambdaidem.WithMaxAttempts(2))
		k.ExpectDeadLetter("o-3", lambdaidem.ReasonPoison)
		k.Poison(`{"order":"o-3","do":"fail"}`)
		if err := k.Check(); err == nil || !strings.Contains(err.Error(), `expected dead letter missing: ExpectDeadLetter("o-3", "poison")`) {
			t.Errorf("Check: %v", err)
		}
	})
	t.Run("only the messages Poison sent", func(t *testing.T) {
		k := lambdaidemtest.New(handler, byOrder)
		k.Poison(`{"order":"o-4","do":"refuse"}`)
		k.Send(`{"order":"o-5","do":"refuse"}`)
		k.Run()
		if err := k.Check(); err == nil || !strings.Contains(err.Error(), `(key "o-5") went to the dead-letter queue as poison`) || strings.Contains(err.Error(), `"o-4"`) {
			t.Errorf("Check: %v\nwant it to report o-5's copy, not o-4's", err)
		}
	})
}

// Options the decorator refuses when it is built are refused when the kit
// is built, not from inside a scenario.
func TestKitRefusesWhatTheDecoratorRefuses(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted a deadline margin as long as the lease")
		}
	}()
	lambdaidemtest.New(careless(new([]string)), byOrder, lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadlineMargin(time.Minute))
}
