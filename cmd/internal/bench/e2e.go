package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// E2EConfig configures RunE2E.
type E2EConfig struct {
	// DynamoDBEndpoint and SQSEndpoint are the local services. Required.
	DynamoDBEndpoint string
	SQSEndpoint      string
	// Region is the services' region. Default us-east-1.
	Region string
	// Messages is how many orders go through. Default 10,000.
	Messages int
	// Bootstrap is a prebuilt examples/orders binary. Empty: build it
	// (go build -tags lambda.norpc) into a temporary directory.
	Bootstrap string
	// BatchSize and MaxConcurrency configure the event source mapping.
	// Defaults 10 and 4.
	BatchSize      int
	MaxConcurrency int
	// Timeout is how long the run, after the queue is filled, may go
	// without any progress (harness.WaitFor) before it gives up. Default
	// 10 minutes.
	Timeout time.Duration
	// Progress receives one line per phase. Default: discarded.
	Progress io.Writer
}

// E2EResult is the outcome of RunE2E.
type E2EResult struct {
	Messages       int
	BatchSize      int
	MaxConcurrency int
	// Send is how long sending took; it overlaps Elapsed.
	Send time.Duration
	// Elapsed runs from the first send to the end of the invocation that
	// deleted the last message.
	Elapsed time.Duration
	// Invocations are the batches handled; Latency their durations.
	Invocations int
	Latency     Dist
	// Effects is the number of effect rows written: one per message when
	// nothing was done twice.
	Effects int
	Stats   localrun.Stats
}

// Busy is the share of the elapsed time the function's slots spent in
// invocations: well below 1, the rate is bound by the queue (the SQS
// emulator), not by the function.
func (r *E2EResult) Busy() float64 {
	var sum time.Duration
	for _, d := range r.Latency.Samples {
		sum += d
	}
	if r.Elapsed <= 0 || r.MaxConcurrency == 0 {
		return 0
	}
	return float64(sum) / float64(r.Elapsed*time.Duration(r.MaxConcurrency))
}

// Rate is messages per second.
func (r *E2EResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// Write writes the end-to-end table as Markdown.
func (r *E2EResult) Write(w io.Writer) {
	fmt.Fprintf(w, "| messages | batch size | max concurrency | invocations | elapsed s | messages / s | invocation p50 ms | p99 ms | slots busy | effect rows |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %.1f | %.0f | %s | %s | %.0f%% | %d |\n",
		r.Messages, r.BatchSize, r.MaxConcurrency, r.Invocations, r.Elapsed.Seconds(), r.Rate(),
		ms(r.Latency.P50()), ms(r.Latency.P99()), 100*r.Busy(), r.Effects)
}

// RunE2E starts the orders example's real bootstrap under localrun on a
// fresh queue, sends Messages orders to it, and measures messages per
// second from the first send until every message is deleted; then it
// checks that every order has exactly one effect row. It creates its
// own tables and queue and deletes them. The run is a scenario on the
// shared harness (internal/harness).
func RunE2E(ctx context.Context, cfg E2EConfig) (*E2EResult, error) {
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		return nil, errors.New("bench: both the DynamoDB and the SQS endpoint are required")
	}
	if cfg.Messages <= 0 {
		cfg.Messages = 10000
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 10
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	h, bootstrap, err := harness.Open(ctx, harness.Config{
		Stack:       harness.Stack{DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, Region: cfg.Region},
		Name:        "lambdaidem-bench-e2e",
		Log:         &harness.Log{Out: cfg.Progress},
		WaitTimeout: cfg.Timeout,
	}, harness.OrdersPackage, cfg.Bootstrap)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.Close() }()

	res := &E2EResult{Messages: cfg.Messages, BatchSize: cfg.BatchSize, MaxConcurrency: cfg.MaxConcurrency}
	var (
		mu       sync.Mutex
		last     time.Time
		fnErrors []string
	)
	h.Obs.OnInvoke = func(inv localrun.Invocation) {
		mu.Lock()
		defer mu.Unlock()
		res.Invocations++
		res.Latency.Add(inv.Duration)
		if inv.Outcome != localrun.OutcomeSuccess && len(fnErrors) < 5 {
			fnErrors = append(fnErrors, fmt.Sprintf("%s: %v", inv.Outcome, inv.Err))
		}
		if end := inv.Started.Add(inv.Duration); end.After(last) {
			last = end
		}
	}
	err = h.Start(ctx, bootstrap, harness.Function{
		Name:     "orders",
		KeyField: harness.OrdersKeyField,
		Env:      []string{"IDEMPOTENCY_NAMESPACE=orders"},
		Effects:  true,
		// A visibility timeout well above any invocation: a redelivery
		// here would be a measurement artefact, not the library's work.
		Visibility:      120 * time.Second,
		BatchSize:       cfg.BatchSize,
		MaxConcurrency:  cfg.MaxConcurrency,
		FunctionTimeout: 30 * time.Second,
		PollWait:        time.Second,
	})
	if err != nil {
		return nil, err
	}
	h.Log.Printf("draining through the orders bootstrap under localrun: batches of %d, %d concurrent", cfg.BatchSize, cfg.MaxConcurrency)

	// The orders are sent while the function drains the queue, as a
	// producer would, eight requests at once: a queue kept short keeps the
	// SQS emulator fast (its receive walks every stored message), and the
	// clock starts with the first send.
	w := harness.Mix{Messages: cfg.Messages, KeyFormat: "e-%d"}.Workload()
	phase := harness.Phase{Name: "e2e", Sends: w.Order, Senders: 8, Until: harness.UntilDeleted}
	h.Log.Printf("sending %d orders", cfg.Messages)
	sendStart := time.Now()
	// A progress line every 10 seconds: this part runs for minutes.
	stopProgress := harness.Every(10*time.Second, func(final bool) {
		if final {
			return
		}
		mu.Lock()
		inv := res.Invocations
		mu.Unlock()
		h.Log.Printf("end to end: %d of %d messages deleted in %d invocations, %s",
			h.Obs.Deleted(), cfg.Messages, inv, time.Since(sendStart).Round(time.Second))
	})
	runErr := h.Send(ctx, w, phase)
	res.Send = time.Since(sendStart)
	if runErr == nil {
		runErr = h.Wait(ctx, w, phase)
	}
	stopProgress()
	if errors.Is(runErr, harness.ErrWaitTimeout) {
		mu.Lock()
		runErr = fmt.Errorf("bench: %d of %d messages deleted, then nothing moved for %s; function errors: %v", h.Obs.Deleted(), cfg.Messages, cfg.Timeout, fnErrors)
		mu.Unlock()
	}
	stopErr := h.Stop(ctx)
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, fmt.Errorf("bench: %w", stopErr)
	}
	res.Stats = h.Stats()
	mu.Lock()
	res.Elapsed = last.Sub(sendStart)
	mu.Unlock()
	if res.Effects, err = h.Count(ctx, h.EffectsTable("")); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if res.Effects != cfg.Messages {
		return res, fmt.Errorf("bench: %d effect rows for %d orders", res.Effects, cfg.Messages)
	}
	return res, nil
}
