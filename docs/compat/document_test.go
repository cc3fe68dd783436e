package compat

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

var update = flag.Bool("update", false, "write docs/compatibility.md from the matrix")

const document = "../compatibility.md"

// setting is a setting, other than a feature, that a constructor checks
// when it is called.
type setting struct {
	constructor, setting string
	build                func()
	want                 error
}

var (
	sqsClient   = sqs.New(sqs.Options{Region: "us-east-1"})
	dynamoDB    = dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	redisClient = redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	noop        = func(context.Context, events.SQSMessage) error { return nil }
	wrapped     = func(context.Context, string) (string, error) { return "", nil }
)

var settings = []setting{
	{"dynamo.New", "table name: empty (an unset variable), not 3 to 255 of `[A-Za-z0-9_.-]`, not a table ARN", func() { dynamo.New(dynamoDB, "") }, dynamo.ErrInvalidTableName},
	{"dynamo.New", "a nil client", func() { dynamo.New(nil, "idempotency") }, idemstore.ErrInvalidOption},
	{"redisstore.New", "a nil client; a prefix with `{` or `}`", func() { redisstore.New(redisClient, "a{b}") }, idemstore.ErrInvalidOption},
	{"sqsqueue.NewSink", "DLQ URL: empty, not `https://HOST/ACCOUNT/NAME` (an ARN, a name)", func() { sqsqueue.NewSink(sqsClient, "orders-dlq") }, sqsqueue.ErrInvalidQueueURL},
	{"sqsqueue.NewVisibilityChanger", "`WithQueueURLs`: a key that is not a queue ARN, a URL of another queue", func() {
		sqsqueue.NewVisibilityChanger(sqsClient, sqsqueue.WithQueueURLs(map[string]string{"orders": "https://sqs.us-east-1.amazonaws.com/111122223333/orders"}))
	}, sqsqueue.ErrInvalidARN},
	{"sqsqueue.NewVisibilityChanger", "`WithEndpoint` that is not an http(s) URL", func() { sqsqueue.NewVisibilityChanger(sqsClient, sqsqueue.WithEndpoint("localhost:4566")) }, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS, lambdaidem.Wrap", "`WithNamespace`: empty, over 256 bytes, not UTF-8, a control character, or what the store cannot keep (`#` DynamoDB, `{` `}` Redis)", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithNamespace(""))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS", "`WithBackoff` without `WithVisibility`", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(time.Second, time.Minute)))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS, lambdaidem.Wrap", "two options that set the key; `WithPayloadHash` with `WithHashJSONFields`", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithKeyJSONField("id"), lambdaidem.WithKeyAttribute("id"))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS, lambdaidem.Wrap", "values that could never work: `WithMaxAttempts(0)`, `WithConcurrency(0)`, `WithLease(0)`, a negative grace or margin, `WithCache(0, ttl)`, nil functions, sinks and changers", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithMaxAttempts(0))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS, lambdaidem.Wrap", "`WithDeadlineMargin` not shorter than `WithLease`; `WithHeartbeat` not shorter than the lease less the margin", func() {
		lambdaidem.Wrap(memstore.New(), wrapped, lambdaidem.WithLease(time.Second), lambdaidem.WithDeadlineMargin(time.Second))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.Wrap", "an SQS option (`WithMaxAttempts`, `WithConcurrency`, `WithVisibility`, `WithInvocationHook`, the SQS key options, ...)", func() {
		lambdaidem.Wrap(memstore.New(), wrapped, lambdaidem.WithMaxAttempts(3))
	}, idemstore.ErrUnsupportedOption},
	{"lambdaidem.SQS", "a Wrap option (`WithWrapKey`, `WithMaxResultBytes`)", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithWrapKey(func(string) (string, error) { return "", nil }))
	}, idemstore.ErrUnsupportedOption},
	{"httpidem.HTTP, httpidem.REST", "a key option in `WithWrapOptions` (the key is the header's)", func() {
		httpidem.HTTP(memstore.New(), nil2xx, httpidem.WithWrapOptions(lambdaidem.WithKeyJSONField("id")))
	}, idemstore.ErrUnsupportedOption},
	{"httpidem.HTTP, httpidem.REST", "`WithWriteRefusedStatus` outside 400-599, `WithUnavailableRetryAfter` or `WithMaxKeyLength` not positive, an empty `WithProblemType`", func() {
		httpidem.HTTP(memstore.New(), nil2xx, httpidem.WithWriteRefusedStatus(200))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS", "`WithBatchedWrites` with `WithHeartbeat` or `WithOptimisticCommit`", func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithBatchedWrites(), lambdaidem.WithHeartbeat(time.Second))
	}, idemstore.ErrInvalidOption},
	{"lambdaidem.SQS", "`WithBatchedWrites` on a store that does not implement `idemstore.Batcher`", func() {
		lambdaidem.SQS(notBatcher{memstore.New()}, noop, lambdaidem.WithBatchedWrites())
	}, lambdaidem.ErrBatchUnsupported},
	{"lambdaidemtest.New", "whatever `lambdaidem.SQS` refuses, when the kit is made", func() {
		lambdaidemtest.New(noop, lambdaidem.WithNamespace("a\x00b"))
	}, idemstore.ErrInvalidOption},
}

// notBatcher is a store with only the methods of idemstore.Store.
type notBatcher struct{ idemstore.Store }

func nil2xx(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
}

// moreRefused are further settings of each constructor that must be
// refused as its row says, by the error it names.
var moreRefused = []struct {
	build func()
	want  error
}{
	{func() { dynamo.New(dynamoDB, "ab") }, dynamo.ErrInvalidTableName},
	{func() { dynamo.New(dynamoDB, "orders table") }, dynamo.ErrInvalidTableName},
	{func() { dynamo.New(dynamoDB, "arn:aws:sqs:us-east-1:123456789012:orders") }, dynamo.ErrInvalidTableName},
	{func() { redisstore.New(nil, "") }, idemstore.ErrInvalidOption},
	{func() { sqsqueue.NewSink(sqsClient, "") }, sqsqueue.ErrInvalidQueueURL},
	{func() { sqsqueue.NewSink(sqsClient, "arn:aws:sqs:us-east-1:123456789012:orders-dlq") }, sqsqueue.ErrInvalidQueueURL},
	{func() { sqsqueue.NewSink(sqsClient, "https://sqs.us-east-1.amazonaws.com/123456789012/orders dlq") }, sqsqueue.ErrInvalidQueueURL},
	{func() {
		sqsqueue.NewVisibilityChanger(sqsClient, sqsqueue.WithQueueURLs(map[string]string{"arn:aws:sqs:us-east-1:123456789012:orders": "orders"}))
	}, sqsqueue.ErrInvalidQueueURL},
	{func() { lambdaidem.Wrap(memstore.New(), wrapped, lambdaidem.WithNamespace(strings.Repeat("n", 257))) }, idemstore.ErrInvalidOption},
	{func() { lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithNamespace("a\x00b")) }, idemstore.ErrInvalidOption},
	{func() { lambdaidem.SQS(dynamo.New(dynamoDB, "orders"), noop, lambdaidem.WithNamespace("orders#eu")) }, idemstore.ErrInvalidOption},
	{func() {
		lambdaidem.SQS(redisstore.New(redisClient, ""), noop, lambdaidem.WithNamespace("orders{eu}"))
	}, idemstore.ErrInvalidOption},
	{func() { lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithDeadLetterSink(nil)) }, idemstore.ErrInvalidOption},
	{func() {
		lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithBatchedWrites(), lambdaidem.WithOptimisticCommit())
	}, idemstore.ErrInvalidOption},
	{func() { lambdaidem.SQS(notBatcher{memstore.New()}, noop, lambdaidem.WithBatchedWrites()) }, idemstore.ErrUnsupportedOption},
	{func() { lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithPayloadHash(nil)) }, idemstore.ErrInvalidOption},
	{func() {
		lambdaidem.Wrap(memstore.New(), wrapped, lambdaidem.WithPayloadHash(func([]byte) (string, error) { return "", nil }), lambdaidem.WithHashJSONFields("a"))
	}, idemstore.ErrInvalidOption},
}

// accepted are settings the constructors must build: the refusals above
// are not refusing everything.
var accepted = []func(){
	func() { dynamo.New(dynamoDB, "orders-idempotency.v2") },
	func() { dynamo.New(dynamoDB, "arn:aws:dynamodb:us-east-1:123456789012:table/orders") },
	func() { sqsqueue.NewSink(sqsClient, "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq") },
	func() { sqsqueue.NewSink(sqsClient, "http://127.0.0.1:4566/000000000000/orders-dlq.fifo") },
	func() {
		sqsqueue.NewVisibilityChanger(sqsClient, sqsqueue.WithQueueURLs(map[string]string{
			"arn:aws:sqs:us-east-1:123456789012:orders": "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
		}))
	},
	func() { lambdaidem.SQS(dynamo.New(dynamoDB, "orders"), noop, lambdaidem.WithNamespace("orders/eu")) },
	func() { lambdaidem.SQS(dynamo.New(dynamoDB, "orders"), noop, lambdaidem.WithBatchedWrites()) },
	func() {
		lambdaidem.SQS(redisstore.New(redisClient, ""), noop, lambdaidem.WithBatchedWrites())
	},
	func() {
		lambdaidem.SQS(redisstore.New(redisClient, ""), noop, lambdaidem.WithNamespace("orders#eu"))
	},
}

// TestSettings asserts every row of the settings table, further refusals
// of the same constructors, and settings they accept.
func TestSettings(t *testing.T) {
	for _, s := range settings {
		err := lambdaidem.Check(s.build)
		var ce *idemstore.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, s.want) {
			t.Errorf("%s, %s: %v, want a ConfigError matching %v", s.constructor, s.setting, err, s.want)
		}
	}
	for i, s := range moreRefused {
		err := lambdaidem.Check(s.build)
		var ce *idemstore.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, s.want) {
			t.Errorf("refusal %d: %v, want a ConfigError matching %v", i, err, s.want)
		}
	}
	for i, build := range accepted {
		if err := lambdaidem.Check(build); err != nil {
			t.Errorf("accepted setting %d refused: %v", i, err)
		}
	}
}

// errName is how the document names a named error.
func errName(err error) string {
	for name, e := range map[string]error{
		"lambdaidem.ErrInvalidOption":     idemstore.ErrInvalidOption,
		"lambdaidem.ErrUnsupportedOption": idemstore.ErrUnsupportedOption,
		"lambdaidem.ErrUnsupportedWrite":  idemstore.ErrUnsupportedWrite,
		"lambdaidem.ErrWaitUnsupported":   lambdaidem.ErrWaitUnsupported,
		"lambdaidem.ErrBatchUnsupported":  lambdaidem.ErrBatchUnsupported,
		"dynamo.ErrInvalidTableName":      dynamo.ErrInvalidTableName,
		"sqsqueue.ErrInvalidQueueURL":     sqsqueue.ErrInvalidQueueURL,
		"sqsqueue.ErrInvalidARN":          sqsqueue.ErrInvalidARN,
	} {
		if e == err {
			return "`" + name + "`"
		}
	}
	panic(fmt.Sprintf("no name for %v", err))
}

// render writes the document.
func render() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`# Compatibility

<!-- Generated by go test ./docs/compat -run TestDocument -update from the
table TestCompatibility runs; edit docs/compat, not this file. -->

Every feature with every store and every entry point. A cell is either
**supported**, and run by the test named below on that store, or **refused
when the handler is built**: the constructor (` + "`lambdaidem.SQS`, `lambdaidem.Wrap`, `httpidem.HTTP`, `httpidem.REST`, the kit's `lambdaidemtest.New`" + `)
panics with a ` + "`*lambdaidem.ConfigError`" + ` that names the option, the store when the
store is the reason, and wraps a named error. No combination fails one message
at a time. ` + "`lambdaidem.Check(func() { ... })`" + ` returns the refusal as an error
instead, for tools that build handlers from their flags.

This page is the table of ` + "[`docs/compat`](compat)" + `, which ` + "`make test`" + ` runs:
` + "`TestCompatibility`" + ` runs every supported cell on the in-memory store, on
DynamoDB Local and on redis-server, and asserts every refusal; ` + "`TestDocument`" + `
fails when this page is not the table as it renders. One cell runs alone with
` + "`go test ./docs/compat -run 'TestCompatibility/STORE/FEATURE/ENTRY'`" + ` (spaces in
names as underscores) on the local stack (` + "`localstack/stack.sh run -- ...`" + `).

## Features by entry point

`)
	p("| feature | turned on by | %s |\n|---|---|%s\n", strings.Join(entryNames(), " | "), strings.Repeat("---|", len(entries)))
	for _, f := range features {
		p("| %s | %s |", f.name, f.enable)
		for _, en := range entries {
			p(" %s |", cellText(f, en))
		}
		p("\n")
	}
	p(`
A refused cell's option is refused with the error named; "supported" is run
on every store unless the cell names some. %s.
`, cellCounts())
	p(`
## What each store declares

Stores declare what they can do (`+"`idemstore.Capabilities`"+`); the decorators read
it when they are built. A store of your own that does not declare anything is
not checked.

| | %s |
|---|%s
`, storeNames(), strings.Repeat("---|", len(stores)))
	p("| completion writes (`WithCompletionWrites[W]`) |")
	for _, s := range stores {
		w := s.writes
		if w == "" {
			w = "none: refused (`lambdaidem.ErrUnsupportedWrite`)"
		}
		p(" %s |", w)
	}
	p("\n| largest result (`WithMaxResultBytes` above it is refused) | any | `dynamo.MaxResultBytes` (%d KiB) | `redisstore.WithMaxResultBytes` (default %d KiB) |\n",
		dynamo.MaxResultBytes>>10, redisstore.DefaultMaxResultBytes>>10)
	p("| namespaces it cannot keep (refused by `WithNamespace`) | none beyond every store's rules | containing `#` | containing `{` or `}` |\n")
	p("| redrive's reset (`idemstore.DeadLetterResetter`) | yes | yes | yes |\n")
	p(`
## The kit and the simulator

The kit (` + "[`lambdaidemtest`](../lambdaidemtest)" + `) runs SQS handlers. ` + "`TestKit`" + ` runs every
feature the SQS handler supports in a kit, with the scenario named, and asserts
that ` + "`lambdaidemtest.New`" + ` refuses, when the kit is made, every option the SQS
handler refuses, with the same error. The simulator
(` + "[`lambdaidemtest/internal/sim`](../lambdaidemtest/internal/sim)" + `) draws each feature under its
invariants, on every store, through SQS and the request streams of Wrap and
httpidem, with the knobs of its ` + "`Config`" + ` named here.

| feature | the kit | the simulator's knobs |
|---|---|---|
`)
	for _, f := range features {
		sim := "not drawn yet"
		if f.sim != "" {
			sim = "`" + strings.ReplaceAll(f.sim, ", ", "`, `") + "`"
		}
		p("| %s | %s | %s |\n", f.name, kitText(f), sim)
	}
	p(`
## Settings checked when built

Besides the features, the constructors refuse settings that could only fail
later, message by message:

| constructor | refused | named error |
|---|---|---|
`)
	for _, s := range settings {
		p("| `%s` | %s | %s |\n", strings.ReplaceAll(s.constructor, ", ", "`, `"), s.setting, errName(s.want))
	}
	p(`
## What a refusal says

Each line is the refusal of a run of the table (` + "`err.Error()`" + ` of the
` + "`*lambdaidem.ConfigError`" + `):

` + "```text\n")
	for _, sample := range samples() {
		p("%s\n", sample)
	}
	p("```\n")
	return b.Bytes()
}

// samples are refusals as they read, from real constructors.
func samples() []string {
	redis := redisstore.New(redisClient, "")
	builds := []func(){
		func() { lambdaidem.SQS(redis, noop, lambdaidem.WithCompletionWrites[foreignWrite]()) },
		func() {
			lambdaidemtest.New(noop, lambdaidem.WithCompletionWrites[types.TransactWriteItem]())
		},
		func() { lambdaidem.Wrap(memstore.New(), wrapped, lambdaidem.WithCache(10, time.Minute)) },
		func() { lambdaidem.SQS(memstore.New(), noop, lambdaidem.WithWaitForCompletion(time.Minute)) },
		func() { lambdaidem.SQS(redis, noop, lambdaidem.WithNamespace("orders{eu}")) },
		settings[0].build,
		settings[3].build,
		settings[7].build,
	}
	var out []string
	for _, b := range builds {
		out = append(out, "panic: "+lambdaidem.Check(b).Error())
	}
	return out
}

func entryNames() []string {
	var n []string
	for _, e := range entries {
		n = append(n, e.name)
	}
	return n
}

func storeNames() string {
	var n []string
	for _, s := range stores {
		n = append(n, s.name)
	}
	return strings.Join(n, " | ")
}

// cellCounts says how many cells the matrix has on each store, supported
// and refused.
func cellCounts() string {
	var per []string
	for _, st := range stores {
		sup, ref := 0, 0
		for _, f := range features {
			for _, en := range entries {
				if cellOf(f, en, st).supported {
					sup++
				} else {
					ref++
				}
			}
		}
		per = append(per, fmt.Sprintf("%s %d supported, %d refused", st.name, sup, ref))
	}
	return fmt.Sprintf("On each store, %d features by %d entry points make %d cells: ", len(features), len(entries), len(features)*len(entries)) + strings.Join(per, "; ")
}

// kitText is a cell of the kit's column.
func kitText(f feature) string {
	if f.kitRefused != nil {
		return "refused when the kit is made, for now: " + f.kitHow + " (" + errName(f.kitRefused) + ")"
	}
	if f.kit == nil {
		c := cellOf(f, entries[0], stores[0])
		return "refused when the kit is made: " + c.why + " (" + errName(c.refused) + ")"
	}
	return "supported, `TestKit/" + strings.ReplaceAll(f.name, " ", "_") + "`: " + f.kitHow
}

// cellText is a cell of the features table.
func cellText(f feature, en entry) string {
	var sup, ref []string
	var refusal cell
	for _, s := range stores {
		c := cellOf(f, en, s)
		if c.supported {
			sup = append(sup, s.name)
		} else {
			ref, refusal = append(ref, s.name), c
		}
	}
	switch {
	case len(ref) == 0:
		return "supported"
	case len(sup) == 0:
		return "refused: " + refusal.why + " (" + errName(refusal.refused) + ")"
	}
	return strings.Join(sup, ", ") + ": supported; " + strings.Join(ref, ", ") + ": refused, " + refusal.why + " (" + errName(refusal.refused) + ")"
}

// TestDocument checks docs/compatibility.md against the table; with
// -update it writes it.
func TestDocument(t *testing.T) {
	got := render()
	if *update {
		if err := os.WriteFile(document, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(document)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, got) {
		t.Fatalf("%s is not the matrix as it renders: run go test ./docs/compat -run TestDocument -update", filepath.Base(document))
	}
}

// TestSimulatorKnobs: every knob the document names is a field of the
// simulator's Config that its generator draws (assigns), so the feature
// is under the simulation's invariants in every exploration.
func TestSimulatorKnobs(t *testing.T) {
	src, err := os.ReadFile("../../lambdaidemtest/internal/sim/config.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range features {
		if f.sim == "" {
			continue // the document says "not drawn yet"
		}
		for _, knob := range strings.Split(f.sim, ", ") {
			if !regexp.MustCompile(`(?m)^\s+`+knob+`\s`).Match(src) && !regexp.MustCompile(`(?m)^\s+(\w+, )*`+knob+`(, \w+)*\s`).Match(src) {
				t.Errorf("%s: the simulator's Config has no field %s", f.name, knob)
			}
			if !regexp.MustCompile(`c\.` + knob + `\s*=[^=]|(?m)^\s+` + knob + `:\s`).Match(src) {
				t.Errorf("%s: the simulator's generator never draws %s", f.name, knob)
			}
		}
	}
}
