package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// RequestRow is the DynamoDB requests one path costs per message, as
// DynamoDB Local received them through the counting proxy.
type RequestRow struct {
	Impl string // VariantLambdaidem or VariantPowertools
	Path string
	// Messages is how many messages the counted runs handled.
	Messages int
	// Ops is the requests received per operation ("UpdateItem").
	Ops map[string]int
	// Want is the target per message, or -1 when there is none.
	Want float64
	// Units is the write capacity units the requests cost, computed from
	// the requests (see writeUnits); -1 when not counted.
	Units int
	// Trips is the round trips the client made, when counted (Redis: a
	// pipeline of commands is one); 0 means the requests are the Ops.
	Trips int
}

// UnitsPerMessage is the write units per message ("" when not counted).
func (r RequestRow) UnitsPerMessage() string {
	if r.Units < 0 {
		return ""
	}
	return unitsText(r.Units, r.Messages)
}

// PerMessage is the requests per message.
func (r RequestRow) PerMessage() float64 {
	total := r.Trips
	for _, n := range r.Ops {
		if r.Trips > 0 {
			break
		}
		total += n
	}
	if r.Messages == 0 {
		return 0
	}
	return float64(total) / float64(r.Messages)
}

// OpsText lists the operations per message, "UpdateItem 2, PutItem 1".
func (r RequestRow) OpsText() string {
	if len(r.Ops) == 0 {
		return "none"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
		parts = append(parts, fmt.Sprintf("%s %s", op, num(float64(r.Ops[op])/float64(r.Messages))))
	}
	return strings.Join(parts, ", ")
}

// num formats a per-message figure: whole numbers without decimals.
func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

func opCounts(p *faultproxy.Proxy) map[string]int {
	got := map[string]int{}
	for target, c := range p.Counts() {
		got[faultproxy.Request{Target: target}.Operation()] += c
	}
	return got
}

// requests runs every path CountRuns times through a client behind a
// counting proxy and reports the requests per message.
func (b *dynamoBench) requests(ctx context.Context) ([]RequestRow, error) {
	fmt.Fprintf(b.cfg.Progress, "requests per message: each path %d times through a counting proxy\n", b.cfg.CountRuns)
	p, err := faultproxy.New(b.cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var units writeUnits
	units.watch(p)
	client := NewClient(p.URL(), b.cfg.Region, b.cfg.Concurrency)
	store := dynamo.New(client, b.table)
	direct := dynamo.New(b.client, b.table)
	var out outcomes
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(b.cfg.Concurrency), lambdaidem.WithInvocationHook(out.hook),
	}
	ok := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, opts...)
	failing := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return fmt.Errorf("bench: handler failure") }, opts...)
	cached := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil },
		append(slices.Clone(opts), lambdaidem.WithCache(1000, time.Hour))...)
	tx := lambdaidem.SQS(store, txHandler(b.effects), opts...)
	optimistic := lambdaidem.SQS(store, txHandler(b.effects), append(slices.Clone(opts), lambdaidem.WithOptimisticCommit())...)
	batched := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, append(slices.Clone(opts), lambdaidem.WithBatchedWrites())...)

	// A path is a setup (not counted) and a counted delivery.
	type path struct {
		name     string
		want     float64
		messages int
		setup    func(ctx context.Context, ids []string) error
		h        sqsHandler
		outcome  lambdaidem.Outcome
		takeover bool
	}
	deliver := func(h sqsHandler, want lambdaidem.Outcome) func(context.Context, []string) error {
		return func(ctx context.Context, ids []string) error {
			_, err := out.run(ctx, h, event(ids...), want)
			return err
		}
	}
	// The decorator's own hash for message-ID keys, so the abandoned
	// record is the one a crashed instance of it would have left.
	hash := lambdaidem.MessageIDHash
	// abandoned leaves an IN_PROGRESS record as a crashed instance would:
	// a lease that ran out minutes ago, or a record whose retention ended.
	abandoned := func(expired bool) func(context.Context, []string) error {
		return func(ctx context.Context, ids []string) error {
			now := time.Now()
			req := idemstore.ClaimRequest{
				Namespace: Namespace, Key: ids[0], PayloadHash: hash, MessageID: ids[0],
				Now: now.Add(-5 * time.Minute), LeaseUntil: now.Add(-4 * time.Minute), ExpiresAt: now.Add(time.Hour),
			}
			if expired {
				req.Now, req.LeaseUntil, req.ExpiresAt = now.Add(-2*time.Hour), now.Add(-2*time.Hour+time.Minute), now.Add(-time.Hour)
			}
			cr, err := direct.Claim(ctx, req)
			if err == nil && !cr.Claimed {
				err = fmt.Errorf("bench: setup claim of %s refused", ids[0])
			}
			return err
		}
	}
	paths := []path{
		{name: PathFirst, want: 2, messages: 1, h: ok, outcome: lambdaidem.OutcomeProcessed},
		{name: PathDuplicate, want: 1, messages: 1, setup: deliver(ok, lambdaidem.OutcomeProcessed), h: ok, outcome: lambdaidem.OutcomeDuplicate},
		{name: "duplicate, WithCache (warm)", want: 0, messages: 1, setup: deliver(cached, lambdaidem.OutcomeProcessed), h: cached, outcome: lambdaidem.OutcomeCachedDuplicate},
		{name: "handler failure", want: 2, messages: 1, h: failing, outcome: lambdaidem.OutcomeFailed},
		{name: "retry after a failure", want: 2, messages: 1, setup: deliver(failing, lambdaidem.OutcomeFailed), h: ok, outcome: lambdaidem.OutcomeProcessed},
		{name: "takeover of an abandoned lease", want: 3, messages: 1, setup: abandoned(false), h: ok, outcome: lambdaidem.OutcomeProcessed, takeover: true},
		{name: "expired record re-created", want: 3, messages: 1, setup: abandoned(true), h: ok, outcome: lambdaidem.OutcomeProcessed},
		{name: PathBatch + " (per message)", want: 2, messages: batchSize, h: ok, outcome: lambdaidem.OutcomeProcessed},
		{name: PathBatchedWrites, want: 4.0 / batchSize, messages: batchSize, h: batched, outcome: lambdaidem.OutcomeProcessed},
		{name: PathTxFirst, want: 2, messages: 1, h: tx, outcome: lambdaidem.OutcomeProcessed},
		{name: PathTxFirst + ", WithOptimisticCommit", want: 1, messages: 1, h: optimistic, outcome: lambdaidem.OutcomeProcessed},
		{name: PathTxFirst + " ×10, WithOptimisticCommit (per message)", want: 1, messages: batchSize, h: optimistic, outcome: lambdaidem.OutcomeProcessed},
	}
	var rows []RequestRow
	for _, pth := range paths {
		row := RequestRow{Impl: VariantLambdaidem, Path: pth.name, Want: pth.want, Ops: map[string]int{}}
		for range b.cfg.CountRuns {
			ids := freshIDs(pth.messages)
			if pth.setup != nil {
				if err := pth.setup(ctx, ids); err != nil {
					return nil, fmt.Errorf("%s: setup: %w", pth.name, err)
				}
			}
			p.ResetCounts()
			units.take()
			ictx, cancel := invocation(ctx)
			_, err := pth.h(ictx, event(ids...))
			cancel()
			var be *lambdaidem.BatchError
			if err != nil && !(pth.outcome == lambdaidem.OutcomeFailed && errors.As(err, &be)) {
				return nil, fmt.Errorf("%s: %w", pth.name, err)
			}
			if err := out.expect(pth.outcome, pth.takeover); err != nil {
				return nil, fmt.Errorf("%s: %w", pth.name, err)
			}
			for op, c := range opCounts(p) {
				row.Ops[op] += c
			}
			row.Units += units.take()
			row.Messages += pth.messages
		}
		rows = append(rows, row)
	}
	if b.node != nil {
		pt, err := b.nodeRequests()
		if err != nil {
			return nil, err
		}
		rows = append(rows, pt...)
	}
	return rows, nil
}

// nodeRequests counts Powertools' requests per path through the harness's
// counting endpoint.
func (b *dynamoBench) nodeRequests() ([]RequestRow, error) {
	p := b.ptProxy
	type path struct {
		name, op string
		messages int
		want     float64
	}
	var rows []RequestRow
	for _, pth := range []path{
		{PathFirst, "first", 1, 2},
		{PathDuplicate, "duplicate", 1, 1},
		{"handler failure", "failure", 1, 2},
		{PathBatch + " (per message)", "batch", batchSize, 2},
	} {
		row := RequestRow{Impl: VariantPowertools, Path: pth.name, Want: -1, Ops: map[string]int{}, Units: -1}
		for range b.cfg.CountRuns {
			if pth.op == "duplicate" {
				if _, err := b.node.call(map[string]any{"op": "prepare-duplicate"}); err != nil {
					return nil, err
				}
			}
			p.ResetCounts()
			if _, err := b.node.call(map[string]any{"op": "count", "path": pth.op}); err != nil {
				return nil, err
			}
			for op, c := range opCounts(p) {
				row.Ops[op] += c
			}
			row.Messages += pth.messages
		}
		rows = append(rows, row)
	}
	return rows, nil
}
