package lambdaidem_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// declared is the in-memory store declaring the capabilities a test
// gives it.
type declared struct {
	lambdaidem.Store
	caps idemstore.Capabilities
}

func (d declared) Capabilities() idemstore.Capabilities { return d.caps }

// undeclared is the in-memory store hidden behind a type that declares
// nothing and unwraps to nothing, as a store of a user's own would be.
type undeclared struct{ lambdaidem.Store }

// counting wraps a store as a request counter would, forwarding its
// declaration through Unwrap.
type counting struct{ lambdaidem.Store }

func (c counting) Unwrap() lambdaidem.Store { return c.Store }

// loop is a wrapper that unwraps to itself.
type loop struct{ lambdaidem.Store }

func (l *loop) Unwrap() lambdaidem.Store { return l }

type ledgerWrite struct{ account string }

type otherWrite struct{}

// refusal builds a handler and returns the *ConfigError it panicked with.
func refusal(t *testing.T, build func()) *lambdaidem.ConfigError {
	t.Helper()
	err := lambdaidem.Check(build)
	var ce *lambdaidem.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("built without a refusal (err %v)", err)
	}
	return ce
}

func TestRefusedWhenBuilt(t *testing.T) {
	t.Parallel()
	plain := undeclared{memstore.New()}
	redisLike := declared{Store: memstore.New(), caps: idemstore.Capabilities{
		Store:          "Braces",
		MaxResultBytes: 1000,
		CheckNamespace: func(ns string) error {
			if strings.ContainsAny(ns, "{}") {
				return errors.New("braces")
			}
			return nil
		},
	}}
	writer := declared{Store: memstore.New(), caps: idemstore.Capabilities{
		Store: "Ledger", CompletionWrites: []reflect.Type{reflect.TypeFor[ledgerWrite]()},
	}}
	sqs := func(s lambdaidem.Store, opts ...lambdaidem.Option) func() {
		return func() { lambdaidem.SQS(s, ok, opts...) }
	}
	wrap := func(s lambdaidem.Store, opts ...lambdaidem.Option) func() {
		return func() {
			lambdaidem.Wrap(s, func(context.Context, string) (string, error) { return "", nil }, opts...)
		}
	}
	for _, tc := range []struct {
		name   string
		build  func()
		want   error
		option string
		store  string
	}{
		{"empty namespace", sqs(plain, lambdaidem.WithNamespace("")), lambdaidem.ErrInvalidOption, "WithNamespace", ""},
		{"long namespace", wrap(plain, lambdaidem.WithNamespace(strings.Repeat("n", idemstore.MaxNamespaceLength+1))), lambdaidem.ErrInvalidOption, "WithNamespace", ""},
		{"control character", sqs(plain, lambdaidem.WithNamespace("a\nb")), lambdaidem.ErrInvalidOption, "WithNamespace", ""},
		{"store's namespace", sqs(redisLike, lambdaidem.WithNamespace("a{b}")), lambdaidem.ErrInvalidOption, "WithNamespace", "Braces"},
		{"backoff without visibility", sqs(plain, lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(time.Second, time.Minute))), lambdaidem.ErrInvalidOption, "WithBackoff without WithVisibility", ""},
		{"two keys", sqs(plain, lambdaidem.WithKeyJSONField("id"), lambdaidem.WithKeyAttribute("k")), lambdaidem.ErrInvalidOption, "WithKeyJSONField and WithKeyAttribute", ""},
		{"two hashes", sqs(plain, lambdaidem.WithPayloadHash(func([]byte) (string, error) { return "", nil }), lambdaidem.WithHashJSONFields("a")), lambdaidem.ErrInvalidOption, "WithPayloadHash and WithHashJSONFields", ""},
		{"zero attempts", sqs(plain, lambdaidem.WithMaxAttempts(0)), lambdaidem.ErrInvalidOption, "WithMaxAttempts", ""},
		{"zero concurrency", sqs(plain, lambdaidem.WithConcurrency(0)), lambdaidem.ErrInvalidOption, "WithConcurrency", ""},
		{"zero lease", sqs(plain, lambdaidem.WithLease(0)), lambdaidem.ErrInvalidOption, "WithLease", ""},
		{"zero retention", sqs(plain, lambdaidem.WithRetention(0)), lambdaidem.ErrInvalidOption, "WithRetention", ""},
		{"empty cache", sqs(plain, lambdaidem.WithCache(0, time.Minute)), lambdaidem.ErrInvalidOption, "WithCache", ""},
		{"nil sink", sqs(plain, lambdaidem.WithDeadLetterSink(nil)), lambdaidem.ErrInvalidOption, "WithDeadLetterSink", ""},
		{"nil key function", sqs(plain, lambdaidem.WithKeyFunc(nil)), lambdaidem.ErrInvalidOption, "WithKeyFunc", ""},
		{"empty JSON path", wrap(plain, lambdaidem.WithKeyJSONField("")), lambdaidem.ErrInvalidOption, "WithKeyJSONField", ""},
		{"cache on Wrap", wrap(plain, lambdaidem.WithCache(10, time.Minute)), lambdaidem.ErrUnsupportedOption, "WithCache", ""},
		{"sink on Wrap", wrap(plain, lambdaidem.WithDeadLetterSink(&sink{})), lambdaidem.ErrUnsupportedOption, "WithDeadLetterSink", ""},
		{"attempts on Wrap", wrap(plain, lambdaidem.WithMaxAttempts(3)), lambdaidem.ErrUnsupportedOption, "WithMaxAttempts", ""},
		{"result limit on SQS", sqs(plain, lambdaidem.WithMaxResultBytes(10)), lambdaidem.ErrUnsupportedOption, "WithMaxResultBytes", ""},
		{"results over the store's", wrap(redisLike, lambdaidem.WithMaxResultBytes(2000)), lambdaidem.ErrUnsupportedOption, "WithMaxResultBytes(2000)", "Braces"},
		{"default results over the store's", wrap(redisLike), lambdaidem.ErrUnsupportedOption, "the default result limit (358400 bytes)", "Braces"},
		{"writes the store does not commit", sqs(writer, lambdaidem.WithCompletionWrites[otherWrite]()), lambdaidem.ErrUnsupportedWrite, "WithCompletionWrites[lambdaidem_test.otherWrite]", "Ledger"},
		{"writes on a store that commits none", wrap(redisLike, lambdaidem.WithMaxResultBytes(10), lambdaidem.WithCompletionWrites[ledgerWrite]()), lambdaidem.ErrUnsupportedOption, "WithCompletionWrites[lambdaidem_test.ledgerWrite]", "Braces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := refusal(t, tc.build)
			if !errors.Is(ce, tc.want) || ce.Option != tc.option || ce.Store != tc.store {
				t.Fatalf("refusal %q: option %q, store %q; want one matching %v, option %q, store %q", ce, ce.Option, ce.Store, tc.want, tc.option, tc.store)
			}
		})
	}

	// What the stores can serve is built.
	for _, build := range []func(){
		sqs(writer, lambdaidem.WithCompletionWrites[ledgerWrite]()),
		wrap(redisLike, lambdaidem.WithMaxResultBytes(1000), lambdaidem.WithNamespace("plain")),
		sqs(struct{ lambdaidem.Store }{plain}, lambdaidem.WithCompletionWrites[otherWrite]()), // a store that declares nothing is not checked
	} {
		if err := lambdaidem.Check(build); err != nil {
			t.Errorf("refused: %v", err)
		}
	}
}

// A write of a type the store does not commit is refused by
// AddCompletionWrite, before the handler returns.
func TestAddCompletionWriteChecksTheType(t *testing.T) {
	t.Parallel()
	writer := declared{Store: memstore.New(), caps: idemstore.Capabilities{
		Store: "Ledger", CompletionWrites: []reflect.Type{reflect.TypeFor[ledgerWrite]()},
	}}
	var added, refused error
	h := lambdaidem.SQS(writer, func(ctx context.Context, _ events.SQSMessage) error {
		refused = lambdaidem.AddCompletionWrite(ctx, otherWrite{})
		return nil
	}, lambdaidem.WithNamespace(ns))
	if _, err := h(context.Background(), batch(msg("m1", "{}"))); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(refused, lambdaidem.ErrUnsupportedWrite) || !strings.Contains(refused.Error(), "Ledger") {
		t.Fatalf("AddCompletionWrite(otherWrite) = %v, want ErrUnsupportedWrite naming the store", refused)
	}

	// A store that declares nothing: the types the handler declared.
	h = lambdaidem.SQS(undeclared{memstore.New()}, func(ctx context.Context, _ events.SQSMessage) error {
		added = lambdaidem.AddCompletionWrite(ctx, otherWrite{})
		refused = lambdaidem.AddCompletionWrite(ctx, &ledgerWrite{})
		return errors.New("drop the writes")
	}, lambdaidem.WithNamespace(ns), lambdaidem.WithCompletionWrites[otherWrite]())
	if _, err := h(context.Background(), batch(msg("m1", "{}"))); err == nil {
		t.Fatal("a failed batch reported no error")
	}
	if added != nil || !errors.Is(refused, lambdaidem.ErrUnsupportedWrite) {
		t.Fatalf("declared write: %v, undeclared: %v; want nil and ErrUnsupportedWrite", added, refused)
	}
}

// Check passes on a panic that is not a refusal.
func TestCheckPassesOtherPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "nil handler") {
			t.Fatalf("recovered %v, want the nil handler's panic", v)
		}
	}()
	_ = lambdaidem.Check(func() { lambdaidem.SQS(memstore.New(), nil) })
}

// A wrapper that unwraps forwards what the store it wraps declares, and
// forwards "nothing declared" as nothing declared.
func TestCapabilitiesOfUnwraps(t *testing.T) {
	t.Parallel()
	writer := declared{Store: memstore.New(), caps: idemstore.Capabilities{
		Store: "Ledger", CompletionWrites: []reflect.Type{reflect.TypeFor[ledgerWrite]()},
	}}
	caps, declares := idemstore.CapabilitiesOf(counting{counting{writer}})
	if !declares || caps.Store != "Ledger" || !caps.CommitsWrite(reflect.TypeFor[ledgerWrite]()) {
		t.Fatalf("two wrappers over a declared store: %+v, %v; want the store's declaration", caps, declares)
	}
	if caps, declares := idemstore.CapabilitiesOf(counting{undeclared{memstore.New()}}); declares {
		t.Fatalf("a wrapper over a store that declares nothing declares %+v", caps)
	}
	if caps, declares := idemstore.CapabilitiesOf(counting{memstore.New()}); !declares || caps.Store != "in-memory" {
		t.Fatalf("a wrapper over the in-memory store: %+v, %v; want its declaration", caps, declares)
	}
	if _, declares := idemstore.CapabilitiesOf(&loop{Store: memstore.New()}); declares {
		t.Fatal("a wrapper that unwraps to itself declares something")
	}
	if _, declares := idemstore.CapabilitiesOf(counting{nil}); declares {
		t.Fatal("a wrapper of nothing declares something")
	}

	// The checks made when a handler is built see through the wrapper.
	ce := refusal(t, func() { lambdaidem.SQS(counting{writer}, ok, lambdaidem.WithCompletionWrites[otherWrite]()) })
	if !errors.Is(ce, lambdaidem.ErrUnsupportedWrite) || ce.Store != "Ledger" {
		t.Fatalf("refusal through a wrapper: %v (store %q), want ErrUnsupportedWrite naming Ledger", ce, ce.Store)
	}
	if err := lambdaidem.Check(func() { lambdaidem.SQS(counting{writer}, ok, lambdaidem.WithCompletionWrites[ledgerWrite]()) }); err != nil {
		t.Fatalf("a write the wrapped store commits, refused: %v", err)
	}
	if err := lambdaidem.Check(func() {
		lambdaidem.SQS(counting{undeclared{memstore.New()}}, ok, lambdaidem.WithCompletionWrites[otherWrite]())
	}); err != nil {
		t.Fatalf("a wrapper over a store that declares nothing, checked: %v", err)
	}
}
