// Command lambdaidem is the operator's tool for a lambdaidem idempotency
// table (DynamoDB, or a Redis store with -store): inspect a key, list stuck,
// failed and dead-lettered records, release or revoke a lease, forget a key,
// count records by status, show and redrive the dead-letter queue, and
// resolve a record whose outcome is unknown. Every subcommand works
// through the store's idemstore.Admin calls. And `lambdaidem new DIR`
// writes a new consumer module: a function on lambdaidem with its kit
// tests, template.yaml and Makefile. Run it with -h, or SUBCOMMAND -h, for
// usage.
//
//	lambdaidem get -table idempotency -namespace orders order-42
//	lambdaidem list -table idempotency --stuck
//	lambdaidem redrive -table idempotency --dlq https://sqs.../orders-dlq --source arn:aws:sqs:...:orders --dry-run
//	lambdaidem new -store redis welcome-email
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Exit codes. Scripts tell outcomes apart by them.
const (
	exitOK       = 0
	exitFailed   = 1 // the operation failed (store unreachable, bad table, ...)
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // no record for the key
	exitRefused  = 4 // refused on purpose (a live lease, a dead-lettered record, no confirmation, ...)
)

const usage = `lambdaidem inspects and repairs a lambdaidem idempotency table and its
dead-letter queue, and starts a consumer of your own.

Usage:
  lambdaidem SUBCOMMAND [flags] [ARGS]

Subcommands:
  get KEY       show one record
  list          list IN_PROGRESS, FAILED and DEAD_LETTERED records (the open index)
  release KEY   end a stuck lease (IN_PROGRESS -> FAILED), or with -force revoke a live one
  forget KEY    delete a record, so the next message with its key runs as a new one
  stats         count records by status
  dlq           show what the dead-letter queue holds (reason, key, error, body) without
                moving it; reading raises each message's receive count
  redrive       move dead-lettered messages back to their source queue (-dry-run: say
                what it would do with each); outcome_unknown ones only when asked by
                name (-include-outcome-unknown)
  resolve KEY   record what you found about an outcome_unknown record: -applied (done;
                its copy deleted), -not-applied (its copy sent back to run once more)
                or -abandon (kept, never run)
  new DIR       write a new Go module in DIR: an SQS-triggered function on lambdaidem,
                its kit tests, template.yaml and a Makefile (make test, make local);
                flags -store dynamodb|redis, -module PATH, -replace PATH (the clone)

Every subcommand but new takes:
  -table NAME       the DynamoDB table (env LAMBDAIDEM_TABLE)
  -namespace NS     the namespace the function stores its keys in (env LAMBDAIDEM_NAMESPACE):
                    what it set with WithNamespace, else its function name. Without
                    it, list and stats cover all namespaces, and get, release,
                    forget and resolve use the library's own default:
                    AWS_LAMBDA_FUNCTION_NAME if set, else "default"
  -region REGION    (env AWS_REGION, AWS_DEFAULT_REGION)
  -endpoint URL     DynamoDB endpoint (env AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL)
  -store URL        a Redis store instead of DynamoDB: redis://HOST:PORT[/DB], rediss://
                    (TLS), redis+cluster:// or rediss+cluster:// (env LAMBDAIDEM_STORE);
                    list and stats then need -namespace, and stats -all is refused
  -json             machine-readable output on stdout
Credentials come from the SDK's usual chain (environment, AWS_PROFILE, SSO, ...).
Flags may come before or after the arguments.

Exit codes: 0 ok, 1 operation failed, 2 usage error, 3 not found,
4 refused (a live lease, a dead-lettered record to forget, a record that
changed since it was read, a record not awaiting a decision or decided too
soon, no confirmation).

Run "lambdaidem SUBCOMMAND -h" for a subcommand's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code. Forget may ask
// for confirmation when standard input is a terminal.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, env: env, now: time.Now}
	if isTerminal(os.Stdin) {
		a.stdin = os.Stdin
	}
	return a.run(ctx, args)
}

// isTerminal reports whether f looks like an interactive terminal: a
// character device other than the null device (which is one too, and is
// what stdin is under cron, CI and nohup). It errs towards "not a
// terminal", where forget then needs -yes.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && !os.SameFile(st, null)
}

// app is one run of the command, with everything from outside it: output,
// environment, clock, and an interactive terminal if there is one.
type app struct {
	stdout, stderr io.Writer
	env            func(string) string
	now            func() time.Time
	// stdin is the terminal to ask for confirmation on; nil when not
	// interactive.
	stdin io.Reader
	// wroteJSON records that stdout holds a JSON document already, so a
	// failure after it (redrive's summary) adds no second one.
	wroteJSON bool
	// goCmd runs the go command for new (go mod tidy); nil: the go
	// command on PATH.
	goCmd func(ctx context.Context, dir string, args ...string) ([]byte, error)
}

type command struct {
	name    string
	args    string // positional arguments, for usage
	summary string
	run     func(ctx context.Context, a *app, c *common, args []string) error
	flags   func(fs *flag.FlagSet) // subcommand flags
}

func commands() []*command {
	return []*command{getCmd(), listCmd(), releaseCmd(), forgetCmd(), statsCmd(), dlqCmd(), redriveCmd(), resolveCmd()}
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, usage)
		return exitOK
	}
	if args[0] == "new" {
		return a.runNew(ctx, args[1:])
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(a.stderr, "lambdaidem: unknown subcommand %q\n\n%s", args[0], usage)
		return exitUsage
	}
	c, pos, err := a.parse(cmd, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "lambdaidem %s: %v\n(run \"lambdaidem %s -h\" for usage)\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	err = cmd.run(ctx, a, c, pos)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(a.stderr, "lambdaidem %s: %v\n", cmd.name, err)
	if code == exitUsage {
		fmt.Fprintf(a.stderr, "(run \"lambdaidem %s -h\" for usage)\n", cmd.name)
	}
	if c.json && !a.wroteJSON {
		a.writeJSON(errorJSON{Error: err.Error(), Code: codeName(code)})
	}
	return code
}

// usageError marks a bad command line found after flag parsing.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// refusedError marks an operation refused on purpose.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

func refusef(format string, args ...any) error {
	return &refusedError{fmt.Errorf(format, args...)}
}

func exitCode(err error) int {
	var ue *usageError
	var re *refusedError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &re),
		errors.Is(err, idemstore.ErrInProgress),
		errors.Is(err, idemstore.ErrRecordChanged),
		errors.Is(err, idemstore.ErrNotInProgress),
		errors.Is(err, idemstore.ErrWouldAbandonCopy),
		errors.Is(err, idemstore.ErrNotOutcomeUnknown),
		errors.Is(err, idemstore.ErrResolved),
		errors.Is(err, sqsqueue.ErrTooSoon):
		return exitRefused
	case errors.Is(err, idemstore.ErrNotFound):
		return exitNotFound
	case errors.Is(err, dynamo.ErrInvalidKey),
		errors.Is(err, redisstore.ErrInvalidKey),
		errors.Is(err, idemstore.ErrNamespaceRequired),
		errors.Is(err, idemstore.ErrNotIndexed):
		return exitUsage
	}
	return exitFailed
}

func codeName(code int) string {
	switch code {
	case exitUsage:
		return "usage"
	case exitNotFound:
		return "not_found"
	case exitRefused:
		return "refused"
	}
	return "failed"
}

type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// common holds the flags every subcommand takes.
type common struct {
	table, namespace, region, endpoint string
	json                               bool
	// store is -store: "" for DynamoDB, or a redis:// URL.
	store string
}

// parse reads the subcommand's flags, which may come before, between and
// after its positional arguments ("get KEY -json"); everything after "--" is
// positional.
func (a *app) parse(cmd *command, args []string) (*common, []string, error) {
	c := &common{}
	fs := flag.NewFlagSet("lambdaidem "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.StringVar(&c.table, "table", a.env("LAMBDAIDEM_TABLE"), "DynamoDB `table` (env LAMBDAIDEM_TABLE)")
	fs.StringVar(&c.namespace, "namespace", a.env("LAMBDAIDEM_NAMESPACE"), "record `namespace`: the function's WithNamespace, else its name (env LAMBDAIDEM_NAMESPACE; get, release, forget and resolve default to AWS_LAMBDA_FUNCTION_NAME, else \"default\")")
	fs.StringVar(&c.region, "region", firstOf(a.env("AWS_REGION"), a.env("AWS_DEFAULT_REGION")), "AWS `region` (env AWS_REGION)")
	fs.StringVar(&c.endpoint, "endpoint", firstOf(a.env("AWS_ENDPOINT_URL_DYNAMODB"), a.env("AWS_ENDPOINT_URL")), "DynamoDB endpoint `URL` (env AWS_ENDPOINT_URL_DYNAMODB)")
	fs.BoolVar(&c.json, "json", false, "print JSON on stdout")
	fs.StringVar(&c.store, "store", a.env("LAMBDAIDEM_STORE"), "the store: dynamodb (default, with -table) or a Redis `URL` redis://HOST:PORT, rediss://..., redis+cluster://... (env LAMBDAIDEM_STORE)")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: lambdaidem %s [flags]", cmd.name)
		if cmd.args != "" {
			fmt.Fprintf(w, " %s", cmd.args)
		}
		fmt.Fprintf(w, "\n\n%s\n\nFlags:\n", cmd.summary)
		fs.PrintDefaults()
	}
	if helpAsked(args) {
		// -h prints to stdout: it is what was asked for, not an error.
		fs.SetOutput(a.stdout)
		fs.Usage()
		return nil, nil, flag.ErrHelp
	}
	var pos, tail []string
	if i := indexOf(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if err := c.checkStore(); err != nil {
		return nil, nil, err
	}
	return c, append(pos, tail...), nil
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// needTable checks -table.
func (c *common) needTable() error {
	if c.isRedis() {
		return nil
	}
	if c.table == "" {
		return usagef("no table: set -table or LAMBDAIDEM_TABLE")
	}
	if err := dynamo.CheckTableName(c.table); err != nil {
		return usagef("-table: %v", err)
	}
	return nil
}

// needKey checks the flags and arguments of the subcommands that act on one
// key. Without a namespace it takes the one the library itself would use
// (defaultNamespace); every message names the namespace it acted on.
func (c *common) needKey(args []string) (string, error) {
	if err := c.needTable(); err != nil {
		return "", err
	}
	switch len(args) {
	case 0:
		return "", usagef("no KEY given")
	case 1:
		return args[0], nil
	}
	return "", usagef("one KEY expected, got %d arguments %q", len(args), args)
}

// defaultNamespace is the namespace the library uses when WithNamespace is
// not set: the function's name in Lambda, "default" elsewhere.
func defaultNamespace(env func(string) string) string {
	return cmp.Or(env("AWS_LAMBDA_FUNCTION_NAME"), "default")
}

// where names a key for messages: table, namespace and key.
func (c *common) where(key string) string {
	return fmt.Sprintf("key %q in namespace %q of %s", key, c.namespace, c.place())
}

// place names the store in messages: "table NAME" for DynamoDB, "store
// URL" (without its password) for Redis.
func (c *common) place() string {
	if c.isRedis() {
		return "store " + c.table
	}
	return "table " + c.table
}

func (a *app) writeJSON(v any) {
	a.wroteJSON = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// progressf writes a progress line to stderr.
func (a *app) progressf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "lambdaidem: "+format+"\n", args...)
}

// confirm asks a yes/no question on the terminal. Without a terminal it
// refuses: nothing destructive happens without an explicit yes.
func (a *app) confirm(question string) (bool, error) {
	if a.stdin == nil {
		return false, refusef("not confirmed: standard input is not a terminal; pass --yes to confirm")
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, refusef("not confirmed (%v)", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// helpAsked reports whether args ask for help before a "--".
func helpAsked(args []string) bool {
	for _, arg := range args {
		if arg == "--" {
			return false
		}
		if arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h" {
			return true
		}
	}
	return false
}
