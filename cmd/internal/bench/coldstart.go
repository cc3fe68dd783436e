package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

// Cold start and memory. Both functions do the orders example's job (an
// idempotent effect row per order, keyed by the body's order_id): the real
// examples/orders bootstrap, and cmd/internal/bench/powertools/coldstart.mjs, its
// Powertools counterpart. Each is started as a Lambda runtime starts it,
// with AWS_LAMBDA_RUNTIME_API pointing at a minimal Runtime API served
// here; cold start is the time from just before the process is started to
// its first GET of /next, when its init is over and it waits for work.
// Starts alternate between the two, so load falls on both alike. Memory is
// the process's resident set (VmRSS, and its peak VmHWM) once it has
// handled the given number of messages, in batches of 10, and asks for
// the next.

// ColdConfig configures RunColdStart.
type ColdConfig struct {
	// DynamoDBEndpoint is DynamoDB Local's URL. Required.
	DynamoDBEndpoint string
	// Region defaults to us-east-1.
	Region string
	// Starts is the cold starts measured per function. Default 20.
	Starts int
	// Messages is how many messages each function handles before its
	// memory is read. Default 1000.
	Messages int
	// Bootstrap is a prebuilt examples/orders binary; empty builds one.
	Bootstrap string
	// PowertoolsDir is where the Powertools harness is installed; empty
	// measures the Go bootstrap only.
	PowertoolsDir string
	// Progress receives one line per phase. Default: discarded.
	Progress io.Writer
}

// Function names of the cold-start result.
const (
	ColdGo         = "orders bootstrap (Go)"
	ColdPowertools = "orders on Powertools (TypeScript)"
)

// ColdFunction is one function's cold starts and memory.
type ColdFunction struct {
	Name string
	// Init is the time from process start to its first /next, per start.
	Init Dist
	// RSSKiB and PeakKiB are VmRSS and VmHWM after Messages messages.
	RSSKiB, PeakKiB int64
}

// ColdResult is the outcome of RunColdStart.
type ColdResult struct {
	Starts, Messages int
	Functions        []*ColdFunction
}

// RunColdStart measures cold starts and memory after Messages messages, of
// the orders bootstrap and, with PowertoolsDir, of its Powertools
// counterpart. It creates its tables and deletes them.
func RunColdStart(ctx context.Context, cfg ColdConfig) (*ColdResult, error) {
	if cfg.DynamoDBEndpoint == "" {
		return nil, errors.New("bench: the DynamoDB endpoint is required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Starts <= 0 {
		cfg.Starts = 20
	}
	if cfg.Messages <= 0 {
		cfg.Messages = 1000
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	h, bootstrap, err := harness.Open(ctx, harness.Config{
		Stack: harness.Stack{DynamoDBEndpoint: cfg.DynamoDBEndpoint, Region: cfg.Region},
		Name:  "lambdaidem-cold",
		Log:   &harness.Log{Out: cfg.Progress},
	}, harness.OrdersPackage, cfg.Bootstrap)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.Close() }()
	tables := map[string]string{"idem": h.Prefix + "-idempotency", "effects": h.Prefix + "-effects", "pt": h.Prefix + "-powertools"}
	fmt.Fprintf(cfg.Progress, "cold start: creating tables %s-{idempotency,effects,powertools}\n", h.Prefix)
	if _, err := h.IdempotencyTable(ctx); err != nil {
		return nil, err
	}
	if err := h.KeyTable(ctx, tables["effects"], "pk"); err != nil {
		return nil, err
	}

	env := []string{
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=" + cfg.Region,
		"AWS_ENDPOINT_URL_DYNAMODB=" + cfg.DynamoDBEndpoint,
		harness.StoreAttemptTimeoutVar + "=" + harness.StoreAttemptTimeout.String(),
		"EFFECTS_TABLE=" + tables["effects"],
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
	}
	goFn := &ColdFunction{Name: ColdGo}
	type fn struct {
		*ColdFunction
		cmd func() *exec.Cmd
	}
	fns := []fn{{goFn, func() *exec.Cmd {
		c := exec.Command(bootstrap)
		c.Env = append(os.Environ(), append(env, "IDEMPOTENCY_TABLE="+tables["idem"], "IDEMPOTENCY_NAMESPACE=orders",
			"AWS_LAMBDA_FUNCTION_NAME=orders", "AWS_LAMBDA_LOG_LEVEL=WARN")...)
		return c
	}}}
	res := &ColdResult{Starts: cfg.Starts, Messages: cfg.Messages}
	if cfg.PowertoolsDir != "" {
		if err := h.KeyTable(ctx, tables["pt"], "id"); err != nil {
			return nil, err
		}
		if err := writeHarness(cfg.PowertoolsDir); err != nil {
			return nil, err
		}
		dir := cfg.PowertoolsDir
		fns = append(fns, fn{&ColdFunction{Name: ColdPowertools}, func() *exec.Cmd {
			c := exec.Command("node", "coldstart.mjs")
			c.Dir = dir
			c.Env = append(os.Environ(), append(env, "IDEMPOTENCY_TABLE="+tables["pt"],
				"AWS_LAMBDA_FUNCTION_NAME=orders-powertools", "POWERTOOLS_LOG_LEVEL=WARN")...)
			return c
		}})
	}
	fmt.Fprintf(cfg.Progress, "cold start: %d starts of each of %d functions, alternating\n", cfg.Starts, len(fns))
	for i := range cfg.Starts {
		for k := range fns {
			f := fns[(i+k)%len(fns)]
			d, err := coldStart(ctx, f.cmd(), 0, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			f.Init.Add(d)
		}
		if done := i + 1; done%5 == 0 && done < cfg.Starts {
			fmt.Fprintf(cfg.Progress, "cold start: %d/%d\n", done, cfg.Starts)
		}
	}
	for _, f := range fns {
		fmt.Fprintf(cfg.Progress, "memory: %s handles %d messages\n", f.Name, cfg.Messages)
		_, err := coldStart(ctx, f.cmd(), cfg.Messages/batchSize, func(pid int) error {
			rss, hwm, err := memory(pid)
			f.RSSKiB, f.PeakKiB = rss, hwm
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		res.Functions = append(res.Functions, f.ColdFunction)
	}
	effects, err := h.Count(ctx, tables["effects"])
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if want := len(fns) * (cfg.Messages / batchSize) * batchSize; effects != want {
		return nil, fmt.Errorf("bench: %d effect rows after the memory runs, want %d", effects, want)
	}
	return res, nil
}

// memory reads a process's VmRSS and VmHWM in KiB.
func memory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: read memory of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("bench: no VmRSS for process %d", pid)
	}
	return rss, hwm, nil
}

// coldStart starts cmd as a Lambda runtime would, against a Runtime API of
// its own, and returns the time from the start to its first /next. It then
// hands the process batches events of 10 orders, one at a time, checks
// each response, calls atEnd with the process's pid when it asks for the
// event after the last, and kills it.
func coldStart(ctx context.Context, cmd *exec.Cmd, batches int, atEnd func(pid int) error) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	api := &runtimeAPI{next: make(chan struct{}, 1), events: make(chan []byte), results: make(chan runtimeResult, 1)}
	srv := &http.Server{Handler: api.mux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	cmd.Env = append(cmd.Env, "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String())
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedBuffer{}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("bench: start %s: %w", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	fail := func(err error) (time.Duration, error) {
		return 0, fmt.Errorf("%w; its stderr:\n%s", err, tailOf(cmd.Stderr.(*lockedBuffer).String()))
	}
	wait := func() error {
		select {
		case <-api.next:
			return nil
		case err := <-exited:
			exited <- err
			return fmt.Errorf("bench: the process exited before asking for an event: %v", err)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(2 * time.Minute):
			return errors.New("bench: no request for an event within 2 minutes")
		}
	}
	if err := wait(); err != nil {
		return fail(err)
	}
	init := api.firstNext.Sub(t0)
	for b := range batches {
		ev := events.SQSEvent{}
		for i := range batchSize {
			id := newID()
			m := message(id)
			m.Body = fmt.Sprintf(`{"order_id":"cold-%s","amount":%d}`, id, b*batchSize+i)
			ev.Records = append(ev.Records, m)
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			return 0, err
		}
		select {
		case api.events <- raw:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
		var r runtimeResult
		select {
		case r = <-api.results:
		case err := <-exited:
			exited <- err
			return fail(fmt.Errorf("bench: the process exited during batch %d: %v", b+1, err))
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
		if r.err != "" {
			return fail(fmt.Errorf("bench: batch %d failed: %s", b+1, r.err))
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
			return fail(fmt.Errorf("bench: batch %d answered %s", b+1, r.body))
		}
		if err := wait(); err != nil {
			return fail(err)
		}
	}
	if atEnd != nil {
		if err := atEnd(cmd.Process.Pid); err != nil {
			return 0, err
		}
	}
	return init, nil
}

// runtimeAPI is the part of the Lambda Runtime API a function's runtime
// client uses: /next hands out one event at a time, /response and /error
// take the outcome.
type runtimeAPI struct {
	firstNext time.Time
	nexts     atomic.Int64
	next      chan struct{} // a /next arrived
	events    chan []byte
	results   chan runtimeResult
	seq       atomic.Int64
}

type runtimeResult struct {
	body []byte
	err  string
}

func (a *runtimeAPI) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		if a.nexts.Add(1) == 1 {
			a.firstNext = time.Now()
		}
		a.next <- struct{}{}
		select {
		case ev := <-a.events:
			id := "req-" + strconv.FormatInt(a.seq.Add(1), 10)
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", id)
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:orders")
			w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(ev)
		case <-r.Context().Done():
		}
	})
	m.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		a.results <- runtimeResult{body: b}
	})
	m.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		a.results <- runtimeResult{err: string(b)}
	})
	m.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		a.results <- runtimeResult{err: "init error: " + string(b)}
	})
	return m
}

func tailOf(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// Write writes the cold-start table: median and p90 of the starts, and the
// memory after Messages messages.
func (r *ColdResult) Write(w io.Writer) {
	fmt.Fprintf(w, "| function | starts | process start → first /next, median ms | p90 ms | RSS after %d messages, MiB | peak RSS, MiB |\n", r.Messages)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|\n")
	mib := func(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
	for _, f := range r.Functions {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", f.Name, f.Init.N(), ms(f.Init.P50()), ms(f.Init.Quantile(0.9)), mib(f.RSSKiB), mib(f.PeakKiB))
	}
}
