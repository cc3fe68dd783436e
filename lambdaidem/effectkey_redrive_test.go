package lambdaidem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// An operator's redrive keeps the effect key when the key comes from the
// body: the redriven copy, a new message, claims the reset record. Keyed
// by the message ID (the default), the copy is a new key, so a new record
// and a new effect key, as EffectKey's doc and docs/handlers.md say.
func TestEffectKeyAcrossRedrive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []lambdaidem.Option
		stored    string // the first message's stored key
		sameAfter bool
	}{
		{"body key", []lambdaidem.Option{lambdaidem.WithKeyJSONField("user")}, "u-1", true},
		{"message ID", nil, "m1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var keys []string
			fail := true
			h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
				k, _ := lambdaidem.EffectKey(ctx)
				keys = append(keys, k)
				if fail {
					return errors.New("the email API answered 500")
				}
				return nil
			}, b.opts(append(tc.opts, lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithMaxAttempts(1))...)...)
			_, _ = h(context.Background(), batch(msg("m1", `{"user":"u-1"}`)))
			rec := b.record(t, tc.stored)
			if rec.Status != lambdaidem.StatusDeadLettered {
				t.Fatalf("%s is %s, want DEAD_LETTERED", tc.stored, rec.Status)
			}
			// The redrive: the record reset for its copy, the body sent
			// back as a new message.
			if _, err := b.store.ResetDeadLetter(context.Background(), idemstore.ResetRequest{Namespace: ns, Key: tc.stored, DeadLetterMessageID: rec.DeadLetterMessageID, Now: b.clock.Now()}); err != nil {
				t.Fatal(err)
			}
			fail = false
			_, _ = h(context.Background(), batch(msg("m1-redriven", `{"user":"u-1"}`)))
			if len(keys) != 2 || keys[0] == "" || (keys[0] == keys[1]) != tc.sameAfter {
				t.Errorf("effect keys before and after the redrive: %q; want the same: %v", keys, tc.sameAfter)
			}
		})
	}
}
