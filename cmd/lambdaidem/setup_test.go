package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// t0 is the tests' fixed clock origin. Records are written with times
// relative to it and the command runs with a clock set relative to it, so
// outputs do not depend on when the test runs.
var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// bundle is what a command test needs: its own table, a store to seed it,
// and the command's environment.
type bundle struct {
	table string
	ns    string
	store idemstore.Store
	env   map[string]string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	client := testenv.DynamoDB(t)
	table := testenv.Name("lambdaidem-cli")
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	// TTL off: DynamoDB Local would delete the records expired at its
	// real clock, and the tests run on their own clock.
	if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
	return &bundle{
		table: table,
		ns:    "orders",
		store: dynamo.New(client, table),
		env: map[string]string{
			"LAMBDAIDEM_TABLE":          table,
			"LAMBDAIDEM_NAMESPACE":      "orders",
			"AWS_REGION":                "us-east-1",
			"AWS_ACCESS_KEY_ID":         "test",
			"AWS_SECRET_ACCESS_KEY":     "test",
			"AWS_ENDPOINT_URL_DYNAMODB": testenv.Endpoint(t, testenv.DynamoDBEndpointVar),
		},
	}
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command in-process at the given clock (seconds after t0),
// with no terminal.
func (b *bundle) cli(t *testing.T, now int, args ...string) result {
	t.Helper()
	return b.cliWith(t, now, nil, args...)
}

// cliWith runs the command with stdin as its terminal (nil: none).
func (b *bundle) cliWith(t *testing.T, now int, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		stdout: &out, stderr: &errOut,
		env:   func(k string) string { return b.env[k] },
		now:   func() time.Time { return at(now) },
		stdin: stdin,
	}
	code := a.run(t.Context(), args)
	shown := make([]string, len(args))
	for i, arg := range args {
		shown[i] = safe(arg)
	}
	t.Logf("$ lambdaidem %s  (exit %d)\n%s%s", strings.Join(shown, " "), code, out.String(), errOut.String())
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// want checks the exit code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// decode parses -json output.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, r.stdout)
	}
	return v
}

// Seeding goes through the store, the way the decorator writes records.

func (b *bundle) claim(t *testing.T, ns, key string, now, leaseSecs int) idemstore.Lease {
	t.Helper()
	res, err := b.store.Claim(t.Context(), idemstore.ClaimRequest{
		Namespace: ns, Key: key, PayloadHash: "sha256:" + key, MessageID: "msg-" + key,
		Now: at(now), LeaseUntil: at(now + leaseSecs), Grace: 2 * time.Second, ExpiresAt: at(now + 4*86400),
	})
	if err != nil || !res.Claimed {
		t.Fatalf("Claim(%s/%s): %v %+v", ns, key, err, res.Record)
	}
	return res.Lease
}

// claimed returns the lease of the record's latest claim, as its holder
// has it.
func (b *bundle) claimed(t *testing.T, ns, key string, now int) idemstore.Lease {
	t.Helper()
	r, err := b.store.Get(t.Context(), idemstore.GetRequest{Namespace: ns, Key: key, Now: at(now)})
	if err != nil {
		t.Fatalf("Get(%s/%s): %v", ns, key, err)
	}
	return r.Lease()
}

// refusedClaim checks that a claim of the key at now is refused.
func (b *bundle) refusedClaim(t *testing.T, ns, key string, now int) {
	t.Helper()
	res, err := b.store.Claim(t.Context(), idemstore.ClaimRequest{
		Namespace: ns, Key: key, PayloadHash: "sha256:" + key, MessageID: "msg-" + key,
		Now: at(now), LeaseUntil: at(now + 30), Grace: 2 * time.Second, ExpiresAt: at(now + 4*86400),
	})
	if err != nil || res.Claimed {
		t.Fatalf("Claim(%s/%s) at %d = %+v, %v; want refused", ns, key, now, res, err)
	}
}

func (b *bundle) fail(t *testing.T, l idemstore.Lease, now int, msg string) {
	t.Helper()
	if err := b.store.Fail(t.Context(), idemstore.FailRequest{Lease: l, Now: at(now), Error: msg, ExpiresAt: at(now + 4*86400)}); err != nil {
		t.Fatalf("Fail(%s): %v", l.Key, err)
	}
}

func (b *bundle) deadLetter(t *testing.T, l idemstore.Lease, now int, reason idemstore.Reason, msg string) {
	t.Helper()
	err := b.store.DeadLetter(t.Context(), idemstore.DeadLetterRequest{
		Lease: l, Now: at(now), Reason: reason, Error: msg, MessageID: "msg-" + l.Key,
		DeadLetterMessageID: "dlq-" + l.Key, ExpiresAt: at(now + 4*86400),
	})
	if err != nil {
		t.Fatalf("DeadLetter(%s): %v", l.Key, err)
	}
}

func (b *bundle) complete(t *testing.T, l idemstore.Lease, now int, result string) {
	t.Helper()
	err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: l, Now: at(now), Result: []byte(result), ExpiresAt: at(now + 86400)})
	if err != nil {
		t.Fatalf("Complete(%s): %v", l.Key, err)
	}
}

// seed writes one record of each kind in namespace "orders", plus two in
// "billing":
//
//	orders/order-running   IN_PROGRESS, claimed at 0, lease until 600 (valid at 300)
//	orders/order-stuck     IN_PROGRESS, claimed at -3600, lease until -3570 (expired)
//	orders/order-failed    FAILED at -1800 after 2 attempts
//	orders/order-poison    DEAD_LETTERED at -7200 (poison)
//	orders/order-done      COMPLETED at -60
//	orders/order-done-2    COMPLETED at -30
//	billing/inv-1          FAILED at -600
//	billing/inv-2          COMPLETED at -600
func (b *bundle) seed(t *testing.T) {
	t.Helper()
	b.claim(t, "orders", "order-running", 0, 600)
	b.claim(t, "orders", "order-stuck", -3600, 30)
	l := b.claim(t, "orders", "order-failed", -2400, 30)
	b.fail(t, l, -2390, "charge card: 503 Service Unavailable")
	l = b.claim(t, "orders", "order-failed", -1810, 30)
	b.fail(t, l, -1800, "charge card: 503 Service Unavailable\nretry budget exhausted")
	l = b.claim(t, "orders", "order-poison", -7210, 30)
	b.deadLetter(t, l, -7200, idemstore.ReasonPoison, "invalid order: no line items")
	l = b.claim(t, "orders", "order-done", -61, 30)
	b.complete(t, l, -60, `{"receipt":"r-1"}`)
	l = b.claim(t, "orders", "order-done-2", -31, 30)
	b.complete(t, l, -30, "")
	l = b.claim(t, "billing", "inv-1", -610, 30)
	b.fail(t, l, -600, "timeout")
	l = b.claim(t, "billing", "inv-2", -610, 30)
	b.complete(t, l, -600, "")
}
