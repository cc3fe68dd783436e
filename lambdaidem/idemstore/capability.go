package idemstore

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Capabilities is what a Store declares it can do beyond what every Store
// must. lambdaidem.SQS, lambdaidem.Wrap and the handlers built on them
// (httpidem, the test kit) read it when they are built, and refuse an
// option that needs something the store lacks by panicking with a
// [*ConfigError], instead of failing one message at a time. A Store declares its capabilities by
// implementing [Capable]; for a Store that does not, nothing that depends
// on the store is checked at construction.
//
// A Store that wraps another (to count requests, inject faults) should
// implement [Wrapper], so the checks see the inner store's declaration,
// or declare Capabilities of its own when it commits more than the store
// it wraps.
type Capabilities struct {
	// Store names the store in errors: "DynamoDB", "Redis", "in-memory".
	Store string
	// CompletionWrites are the types of write the store commits
	// atomically with a completion (CompleteRequest.Writes, added by the
	// handler with lambdaidem.AddCompletionWrite), compared exactly: a store that
	// commits both T and *T lists both. Empty: the store commits none, and
	// refuses every completion that carries writes with
	// ErrUnsupportedWrite.
	CompletionWrites []reflect.Type
	// MaxResultBytes is the largest result Complete keeps; a larger one
	// fails with ErrResultTooLarge. Zero: the store keeps any result the
	// decorator sends. Every store keeps at least MinResultBytes.
	MaxResultBytes int
	// CheckNamespace, when set, returns an error saying why the store
	// cannot keep a namespace (a character it reserves, a length it cannot
	// store), or nil. Every store is asked to keep only namespaces that
	// pass CheckNamespace of this package first.
	CheckNamespace func(namespace string) error
	// CheckWrite, when set, checks the completion writes a handler has
	// added for the record lease is on, each of a type the store commits,
	// the last the one being added (lambdaidem.AddCompletionWrite), and
	// returns why the store could never commit them (a malformed write, a
	// key it cannot reach from the record, two writes of one item, more
	// writes or bytes than one request of the store takes), or nil.
	// lambdaidem.AddCompletionWrite returns its error at once and drops
	// the write, so a completion never carries what the store would
	// refuse only when it is sent.
	CheckWrite func(lease Lease, writes []any) error
}

// Capable is implemented by a Store that declares its [Capabilities].
// The in-memory, DynamoDB and Redis stores implement it.
type Capable interface {
	Capabilities() Capabilities
}

// Wrapper is implemented by a Store that wraps another and adds no
// capability of its own: one that counts requests, injects faults or
// observes calls. Unwrap returns the store it wraps, whose declaration
// [CapabilitiesOf] reads, so a wrapper neither hides what the store
// declares nor turns a store that declares nothing into one that
// declares it commits nothing. A wrapper that commits more than its
// inner store (completion writes of its own) implements [Capable]
// instead.
type Wrapper interface {
	Unwrap() Store
}

// maxUnwrap bounds how many wrappers CapabilitiesOf follows, against a
// wrapper that returns itself.
const maxUnwrap = 64

// CapabilitiesOf returns the capabilities store declares, and false when
// it declares none. A store declares them by implementing [Capable]; for
// one that does not, CapabilitiesOf follows [Wrapper.Unwrap] to the store
// it wraps, until one is Capable or neither.
func CapabilitiesOf(store Store) (Capabilities, bool) {
	for range maxUnwrap {
		switch s := store.(type) {
		case Capable:
			return s.Capabilities(), true
		case Wrapper:
			store = s.Unwrap()
		default:
			return Capabilities{}, false
		}
	}
	return Capabilities{}, false
}

// CommitsWrite reports whether the store commits completion writes of
// type t.
func (c Capabilities) CommitsWrite(t reflect.Type) bool {
	for _, w := range c.CompletionWrites {
		if w == t {
			return true
		}
	}
	return false
}

// MaxNamespaceLength is the longest namespace, in bytes. Every store
// keeps a namespace beside a stored key (at most MaxKeyLength bytes) in
// its own key, and this leaves room for both in the smallest of them.
const MaxNamespaceLength = 256

// CheckNamespace returns nil when every store can keep ns as a
// namespace, or an error wrapping ErrInvalidOption that says why not: it
// is empty, longer than MaxNamespaceLength, not valid UTF-8 or holds a
// control character. A store may refuse more (Capabilities.CheckNamespace:
// the DynamoDB store reserves '#', the Redis store '{' and '}'); lambdaidem.SQS
// and lambdaidem.Wrap ask both when they are built.
func CheckNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("%w: the namespace is empty", ErrInvalidOption)
	case len(ns) > MaxNamespaceLength:
		return fmt.Errorf("%w: the namespace is %d bytes, over %d", ErrInvalidOption, len(ns), MaxNamespaceLength)
	case !validText(ns):
		return fmt.Errorf("%w: the namespace %q is not valid UTF-8 or holds a control character", ErrInvalidOption, ns)
	}
	return nil
}

// validText reports whether s is valid UTF-8 without control characters.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}
