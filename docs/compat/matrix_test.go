package compat

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// cell is what the matrix says of one feature through one entry point on
// one store.
type cell struct {
	supported bool
	// refused is the named error the handler's constructor panics with
	// (inside a *idemstore.ConfigError); option builds the refused
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
		return cell{refused: f.refusal(), option: f.option, why: "no " + e.name + " counterpart"}
	case f.wrapOnly && e.name == "SQS":
		return cell{refused: f.refusal(), option: f.option, why: f.refusedWhy}
	case f.name == "completion writes" && s.writes == "":
		return cell{refused: idemstore.ErrUnsupportedWrite, byStore: true,
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
								f.run(t, &cellEnv{env: e, entry: en, store: st, feat: f, ns: ns})
								return
							}
							err := lambdaidem.Check(func() { en.build(t, e.store, ns, ok, c.option()) })
							var ce *idemstore.ConfigError
							if !errors.As(err, &ce) || !errors.Is(err, c.refused) {
								t.Fatalf("built with %s: %v, want a *lambdaidem.ConfigError matching %v", f.name, err, c.refused)
							}
							if c.byStore && ce.Store != st.name {
								t.Fatalf("the refusal %q names the store %q, want %q", err, ce.Store, st.name)
							}
							if name := lambdaidem.OptionNames(c.option())[0]; !strings.Contains(ce.Option, name) {
								t.Fatalf("the refusal %q names the option %q, want %s", err, ce.Option, name)
							}
						})
					}
				})
			}
		})
	}
}

// TestRefusalsSayWhy: every refused cell has a reason for the document.
func TestRefusalsSayWhy(t *testing.T) {
	for _, f := range features {
		for _, en := range entries {
			for _, st := range stores {
				if c := cellOf(f, en, st); !c.supported && (c.why == "" || c.option == nil) {
					t.Errorf("%s/%s/%s: a refusal without a reason or an option", f.name, en.name, st.name)
				}
			}
		}
	}
}
