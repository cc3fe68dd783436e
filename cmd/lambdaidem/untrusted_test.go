package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Keys come from message bodies: what get and list print must not carry
// control bytes, escape sequences or bidirectional overrides to the
// operator's terminal.
func TestOutputEscapesWhatATerminalWouldObey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nasty := "evil\x1b]0;pwned\x07\x1b[2J\u202e\x7f\u0085"
	l := b.claim(t, "orders", nasty, -100, 30)
	b.deadLetter(t, l, -90, idemstore.ReasonPoison, "poison: bad \x1b[31mred\x1b[0m\r\nline two\x00")
	for _, args := range [][]string{{"get", "--", nasty}, {"list"}, {"list", "-namespace", ""}} {
		r := b.cli(t, 0, args...).want(t, exitOK)
		for _, c := range r.stdout {
			if c != '\n' && (c < 0x20 || c == 0x7f || c == 0x202e || c == 0x85) {
				t.Errorf("%v prints %U raw:\n%s", args, c, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, `"evil\x1b]0;pwned\a\x1b[2J\u202e\x7f\u0085"`) {
			t.Errorf("%v does not show the key escaped:\n%s", args, r.stdout)
		}
	}
	// A plain value that merely starts with a quote is quoted too, so a
	// quoted value is never taken for a plain one.
	l = b.claim(t, "orders", `"quoted"`, -100, 30)
	b.fail(t, l, -90, "x")
	if out := b.cli(t, 0, "get", `"quoted"`).want(t, exitOK).stdout; !strings.Contains(out, "key              \"\\\"quoted\\\"\"\n") {
		t.Errorf("quote-led key not quoted:\n%s", out)
	}
}

// The slips of the human output: a poison error's reason shown once, no
// lease time for a record that holds none, get without a namespace.
func TestOutputSlips(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)
	l := b.claim(t, "orders", "order-poisoned", -100, 30)
	b.deadLetter(t, l, -90, idemstore.ReasonPoison, lambdaidem.Poison(errors.New("decode order")).Error())
	list := b.cli(t, 0, "list", "-dead-lettered").want(t, exitOK).stdout
	if strings.Contains(list, "poison: poison:") || !strings.Contains(list, "poison: decode order") || !strings.Contains(list, "poison: invalid order: no line items") {
		t.Errorf("dead-letter detail:\n%s", list)
	}
	// Completed 60 s ago with a lease that would have run 30 s more.
	l = b.claim(t, "orders", "order-quick", -61, 90)
	b.complete(t, l, -60, `{}`)
	if out := b.cli(t, 0, "get", "order-quick").want(t, exitOK).stdout; !strings.Contains(out, "lease            none (the record is COMPLETED)\n") || strings.Contains(out, "ended") {
		t.Errorf("completed record's lease line:\n%s", out)
	}

	// Without a namespace, get uses the library's default: the function's
	// name when set, else "default", and says so.
	delete(b.env, "LAMBDAIDEM_NAMESPACE")
	r := b.cli(t, 0, "get", "order-done").want(t, exitNotFound)
	if !strings.Contains(r.stderr, `using "default"`) || !strings.Contains(r.stderr, `namespace "default"`) {
		t.Errorf("default namespace not named:\n%s", r.stderr)
	}
	b.env["AWS_LAMBDA_FUNCTION_NAME"] = "orders"
	if r := decode[recordJSON](t, b.cli(t, 0, "get", "order-done", "-json").want(t, exitOK)); r.Namespace != "orders" {
		t.Errorf("namespace %q, want orders from AWS_LAMBDA_FUNCTION_NAME", r.Namespace)
	}
}

// A long key is stored hashed: get finds it by the hashed form list shows,
// and by the original key too.
func TestGetFindsHashedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("order-", 50)
	stored := idemstore.StoredKey(long)
	l := b.claim(t, "orders", stored, -100, 30)
	b.fail(t, l, -90, "x")
	for _, arg := range []string{stored, long} {
		if r := decode[recordJSON](t, b.cli(t, 0, "get", arg, "-json").want(t, exitOK)); r.Key != stored {
			t.Errorf("get %.20q…: key %q", arg, r.Key)
		}
	}
}
