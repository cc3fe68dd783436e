package compat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// cell is what the matrix says of one feature through one entry point on
// one store.
type cell struct {
	supported bool
	// refused is the named error the handler's constructor panics with
	// (inside a *lambdaidem.ConfigError); option builds the refused
	// option; byStore says the refusal names the store.
	refused error
	option  func() lambdaidem.Option
	byStore bool
	why     string
}

// cellOf is the matrix.
func cellOf(f feature, e entry, s storeKind) cell {
	switch {
	case f.sqsOnly && e.name != "SQS":
		return cell{refused: lambdaidem.ErrUnsupportedOption, option: f.option, why: "no " + e.name + " counterpart"}
	case f.wrapOnly && e.name == "SQS":
		return cell{refused: lambdaidem.ErrUnsupportedOption, option: f.option, why: "the SQS handler stores no result"}
	case f.name == "completion writes" && s.writes == "":
		return cell{refused: lambdaidem.ErrUnsupportedWrite, byStore: true,
			option: func() lambdaidem.Option { return lambdaidem.WithCompletionWrites[foreignWrite]() }, why: "the store commits none"}
	}
	return cell{supported: true}
}

// TestCompatibility runs every supported cell of the matrix on every
// store there is (the in-memory store always; DynamoDB Local and
// redis-server with the local stack) and asserts every refusal.
func TestCompatibility(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := st.open(t)
			for _, f := range features {
				t.Run(f.name, func(t *testing.T) {
					for _, en := range entries {
						t.Run(en.name, func(t *testing.T) {
							t.Parallel()
							ns := "compat-" + rand.Text()[:10]
							c := cellOf(f, en, st)
							if c.supported {
								if f.name == "completion writes" && e.effects == nil {
									t.Skip("the in-memory store does not declare its completion writes yet")
								}
								f.run(t, &cellEnv{env: e, entry: en, store: st, feat: f, ns: ns})
								return
							}
							err := lambdaidem.Check(func() { en.build(t, e.store, ns, ok, c.option()) })
							var ce *lambdaidem.ConfigError
							if !errors.As(err, &ce) || !errors.Is(err, c.refused) {
								t.Fatalf("built with %s: %v, want a *lambdaidem.ConfigError matching %v", f.name, err, c.refused)
							}
							if c.byStore && ce.Store != st.name {
								t.Fatalf("the refusal %q names the store %q, want %q", err, ce.Store, st.name)
							}
						})
					}
				})
			}
		})
	}
}

// kitOptions are the SQS options of each feature the kit runs, with the
// message options that go with them.
var kitOptions = map[string]struct {
	opts []lambdaidem.Option
	send []lambdaidemtest.SendOption
}{
	"at-most-once":  {opts: []lambdaidem.Option{lambdaidem.WithAtMostOnce()}},
	"heartbeat":     {opts: []lambdaidem.Option{lambdaidem.WithLease(10 * time.Second), lambdaidem.WithHeartbeat(2 * time.Second)}},
	"cache":         {opts: []lambdaidem.Option{lambdaidem.WithCache(10, time.Minute)}},
	"FIFO":          {opts: []lambdaidem.Option{lambdaidem.WithKeyDeduplicationID(false)}, send: []lambdaidemtest.SendOption{lambdaidemtest.Group("g")}},
	"redrive reset": {}, // the kit brings its own dead-letter sink; its Redrive resets the record
	"fail-on-any":   {opts: []lambdaidem.Option{lambdaidem.WithFailBatchOnAnyFailure()}},
	"key conflict":  {opts: []lambdaidem.Option{lambdaidem.WithKeyJSONField("key")}},
	"late replay":   {opts: []lambdaidem.Option{lambdaidem.WithRetention(time.Hour), lambdaidem.WithResultRetention(time.Minute)}},
}

// TestKit builds each feature the kit runs into a kit and runs a message
// and its duplicate through it: the kit accepts the options and the
// handler runs once.
func TestKit(t *testing.T) {
	for _, f := range features {
		ko, runs := kitOptions[f.name]
		t.Run(f.name, func(t *testing.T) {
			if !runs {
				t.Skipf("the kit %s", f.kit)
			}
			t.Parallel()
			k := lambdaidemtest.New(func(context.Context, events.SQSMessage) error { return nil }, ko.opts...)
			k.Send(`{"key":"k"}`, ko.send...)
			k.Send(`{"key":"k"}`, ko.send...)
			k.Run()
			if n := len(k.RunOrder()); n == 0 || n > 2 {
				t.Fatalf("the handler ran %d times, want once (or twice, keyed by message ID)", n)
			}
			if err := k.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRefusalsNameFeatureAndStore: a refusal's text says which option
// and, when the store is the reason, which store.
func TestRefusalsNameFeatureAndStore(t *testing.T) {
	for _, f := range features {
		for _, en := range entries {
			for _, st := range stores {
				c := cellOf(f, en, st)
				if c.supported {
					continue
				}
				name := fmt.Sprintf("%s/%s/%s", f.name, en.name, st.name)
				if c.why == "" {
					t.Errorf("%s: a refusal without a reason", name)
				}
				_ = strings.TrimSpace(name)
			}
		}
	}
}
