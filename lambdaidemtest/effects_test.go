package lambdaidemtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// emailAPI is a fake email provider. It records each email it sends with
// lambdaidemtest.Effect, and it may answer with an error after sending (the
// kit decides: ErrorAfterEffect). With dedup it remembers the
// Idempotency-Key of every request it served and sends nothing for a
// repeat, as a provider that honours the header does.
type emailAPI struct {
	dedup bool
	seen  map[string]bool
}

func (a *emailAPI) send(ctx context.Context, to, idempotencyKey string) error {
	if a.dedup && idempotencyKey != "" {
		if a.seen[idempotencyKey] {
			return nil // the same request again: answered, not sent again
		}
		if a.seen == nil {
			a.seen = map[string]bool{}
		}
		a.seen[idempotencyKey] = true
	}
	return lambdaidemtest.Effect(ctx, "welcome email to "+to)
}

// welcome sends a welcome email per signup; how it reports a failure of
// the email API is the handler's choice.
func welcome(api *emailAPI, onError func(error) error) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var s struct{ User string }
		if err := json.Unmarshal([]byte(msg.Body), &s); err != nil {
			return lambdaidem.Poison(err)
		}
		key, _ := lambdaidem.EffectKey(ctx)
		if err := api.send(ctx, s.User, key); err != nil {
			return onError(err)
		}
		return nil
	}
}

func passOn(err error) error { return err }

var byUser = lambdaidem.WithKeyJSONField("User")

const signup = `{"User":"alice"}`

// The user's report, in at-least-once mode: the email API sends the email
// and answers 504, the handler returns the error, the retry sends a second
// email. The kit reports it from the effects the fake recorded, with no
// counter of the test's own.
func TestKitReportsARepeatedEffect(t *testing.T) {
	k := lambdaidemtest.New(welcome(&emailAPI{}, passOn), byUser)
	k.ErrorAfterEffect(signup)
	if got := k.Effects("alice"); len(got) != 2 {
		t.Fatalf("effects %v, want the email twice", got)
	}
	err := k.Check()
	if err == nil {
		t.Fatal("Check passed a second welcome email")
	}
	for _, want := range []string{`effect "welcome email to alice" of key "alice" happened 2 times`, "at-least-once allows one", "its answer lost", "lambdaidem.EffectKey"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's report lacks %q:\n%v", want, err)
		}
	}
}

// What fixes it: the email API recognises the retry by its idempotency
// key (lambdaidem.EffectKey), or the handler declares the outcome unknown,
// or the decorator runs at most once. The failure the kit caused needs no
// declaration; the dead letters do.
func TestKitErrorAfterEffectFixed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		api        *emailAPI
		onError    func(error) error
		opts       []lambdaidem.Option
		deadLetter bool
	}{
		{"the API honours the effect key", &emailAPI{dedup: true}, passOn, nil, false},
		{"the handler declares the outcome unknown", &emailAPI{}, lambdaidem.OutcomeUnknown, nil, true},
		{"at most once", &emailAPI{}, passOn, []lambdaidem.Option{lambdaidem.WithAtMostOnce()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := lambdaidemtest.New(welcome(tc.api, tc.onError), append(tc.opts, byUser)...)
			if tc.deadLetter {
				k.ExpectDeadLetter("alice", lambdaidem.ReasonOutcomeUnknown)
			}
			k.SetTrace(true)
			k.ErrorAfterEffect(signup)
			if got := k.Effects("alice"); len(got) != 1 {
				t.Errorf("effects %v, want one email\n%s", got, k.Trace())
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Abandoned attempts are what at-least-once mode may repeat: a crash after
// the effect, a lease lost before the completion. At-most-once repeats
// nothing. A holder that had its effect after its context ended (it was
// paused past its lease and ignored the context) is the handler's doing,
// and is reported.
func TestKitJudgesEffectsByMode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scenario func(*lambdaidemtest.Kit, string)
		amo      bool
		effects  int
		report   string
	}{
		{"crash after the effect", func(k *lambdaidemtest.Kit, b string) { k.CrashAfterEffect(b) }, false, 2, ""},
		{"crash after the effect, at most once", func(k *lambdaidemtest.Kit, b string) { k.CrashAfterEffect(b) }, true, 1, ""},
		{"lease lost before the completion", func(k *lambdaidemtest.Kit, b string) { k.LeaseLostBeforeCompletion(b) }, false, 2, ""},
		{"takeover from a paused holder that ignores its context", func(k *lambdaidemtest.Kit, b string) { k.TakeoverFromPaused(b) }, false, 2, "its context already ended"},
		{"delivered twice", func(k *lambdaidemtest.Kit, b string) { k.DeliverTwice(b) }, false, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []lambdaidem.Option{byUser}
			if tc.amo {
				opts = append(opts, lambdaidem.WithAtMostOnce())
			}
			// A handler that ignores its context and never checks a ledger.
			k := lambdaidemtest.New(welcome(&emailAPI{}, passOn), opts...)
			if tc.amo {
				k.ExpectDeadLetter("alice", lambdaidem.ReasonOutcomeUnknown)
			}
			tc.scenario(k, signup)
			if got := k.Effects("alice"); len(got) != tc.effects {
				t.Fatalf("effects %v, want %d", got, tc.effects)
			}
			err := k.Check()
			switch {
			case tc.report == "" && err != nil:
				t.Errorf("Check: %v", err)
			case tc.report != "" && (err == nil || !strings.Contains(err.Error(), tc.report)):
				t.Errorf("Check = %v, want a report naming %q", err, tc.report)
			}
		})
	}
}

// A scenario that proves nothing says so: ErrorAfterEffect with a handler
// whose fake never records its effect.
func TestKitErrorAfterEffectNeedsAnEffect(t *testing.T) {
	k := lambdaidemtest.New(func(context.Context, events.SQSMessage) error { return nil }, byUser)
	k.ErrorAfterEffect(signup)
	if err := k.Check(); err == nil || !strings.Contains(err.Error(), "recorded no effect") {
		t.Fatalf("Check = %v, want it to say the run recorded no effect", err)
	}
}

// The explorer draws lost answers too, and judges effects with Check: a
// handler that passes a lost answer on as a plain error is found out in
// at-least-once mode with no invariant of the test's own; one whose API
// honours the effect key is not.
func TestExplorationJudgesEffects(t *testing.T) {
	explore := func(api func() *emailAPI) *lambdaidemtest.Failure {
		return lambdaidemtest.Exploration{
			Setup: func() (lambdaidem.MessageHandler, func() error) {
				return welcome(api(), passOn), func() error { return nil }
			},
			Options:   []lambdaidem.Option{byUser},
			Messages:  []string{`{"User":"alice"}`, `{"User":"bob"}`, `{"User":"carol"}`},
			Scenarios: 300,
			Operators: &lambdaidemtest.Operators{},
		}.Search()
	}
	f := explore(func() *emailAPI { return &emailAPI{} })
	if f == nil {
		t.Fatal("the explorer found no repeated email from a handler that retries a lost answer")
	}
	if !strings.Contains(f.Error(), "welcome email to") || !strings.Contains(f.Error(), "times; at-least-once allows one") || !strings.Contains(f.Error(), "its answer lost") {
		t.Errorf("the failure does not show the repeated effect and its lost answer:\n%s", f.Error())
	}
	if f := explore(func() *emailAPI { return &emailAPI{dedup: true} }); f != nil {
		t.Errorf("a handler whose API honours the effect key failed:\n%s", f.Error())
	}
}
