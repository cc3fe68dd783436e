package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// ReasonSQSRedrive labels a DLQ message that SQS's redrive policy moved
// there (no library metadata): the backstop, not the library's decision.
const ReasonSQSRedrive = "sqs_redrive"

// Summary is the outcome of one run. The invariants (Lost,
// DuplicateEffects, PoisonDeadLettered) come from what the run left
// behind: the effects table, the DLQ and the idempotency records. The
// outcome counts come from the library's log lines and the runner.
type Summary struct {
	Elapsed time.Duration

	Sent         int // messages sent
	UniqueOrders int
	Deliveries   int // records handed to the function, redeliveries included
	Invocations  int
	HandlerRuns  int // claims of a key: the handler ran (or crashed) once per claim
	Effects      int // rows in the effects table
	// DuplicatesSuppressed are deliveries acknowledged without running the
	// handler because the key was already done.
	DuplicatesSuppressed int
	// HeldBack are deliveries refused while another attempt held the key
	// (in_progress); SQS delivers them again later.
	HeldBack       int
	FailedAttempts int
	// DeadLettered counts DLQ messages by reason.
	DeadLettered map[string]int
	Crashes      int // invocations that ended with the process exiting
	Timeouts     int
	Restarts     int // function processes started to replace one

	// Lost are orders with neither an effect nor a DLQ message.
	Lost []string
	// DuplicateEffects maps orders with more than one effect to their count.
	DuplicateEffects map[string]int
	// PoisonDeadLettered reports whether every poison order is in the DLQ
	// with reason poison.
	PoisonDeadLettered bool

	// PerMode is how each function did on "one effect per order".
	PerMode map[Mode]ModeSummary

	Rows []Row

	// Violations lists the broken invariants; empty means the run passed.
	Violations []string
}

// ModeSummary is one function's tally: of the orders that must have an
// effect (all but poison ones), how many have exactly one.
type ModeSummary struct {
	Orders     int // orders that must have an effect
	ExactlyOne int
	Effects    int // effect rows in the function's table
}

// Row is one line of the per-scenario table.
type Row struct {
	Mode        Mode
	Scenario    Scenario
	Orders      int
	Messages    int
	Deliveries  int
	HandlerRuns int
	Effects     int
	DLQ         string // reasons, or "-"
	Outcomes    string // library outcomes of the deliveries
}

// OK reports whether every invariant held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

// summarize reads back what the run left behind and builds the summary.
func (d *demo) summarize(ctx context.Context, stats localrun.Stats) (*Summary, error) {
	w := d.opts.Workload
	effects, err := d.scanEffects(ctx)
	if err != nil {
		return nil, err
	}
	dlq, err := d.readDLQ(ctx)
	if err != nil {
		return nil, err
	}
	store := dynamo.New(d.ddb, d.res.idempotencyTable)
	attempts := map[string]int{}
	for _, o := range w.Orders {
		rec, err := store.Get(ctx, lambdaidem.GetRequest{Namespace: namespaceOf(o.Mode), Key: o.ID, Now: time.Now()})
		switch {
		case errors.Is(err, lambdaidem.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("read idempotency record %s: %w", o.ID, err)
		default:
			attempts[o.ID] = rec.Attempts
		}
	}
	outcomes, byKey, deliveries, restarts := d.obs.snapshot()
	d.sentMu.Lock()
	perOrderDeliveries := map[string]int{}
	for id, n := range deliveries {
		perOrderDeliveries[d.msgOrder[id]] += n
	}
	sent := d.sent
	d.sentMu.Unlock()

	s := &Summary{
		Elapsed:              time.Since(d.start),
		Sent:                 sent,
		UniqueOrders:         len(w.Orders),
		Deliveries:           int(stats.Records),
		Invocations:          int(stats.Batches),
		DuplicatesSuppressed: outcomes["duplicate"] + outcomes["duplicate_cached"] + outcomes["duplicate_dead_lettered"] + outcomes["late_replay"],
		HeldBack:             outcomes["in_progress"],
		FailedAttempts:       outcomes["failed"],
		DeadLettered:         map[string]int{},
		Crashes:              int(stats.Crashes),
		Timeouts:             int(stats.Timeouts),
		Restarts:             restarts,
		DuplicateEffects:     map[string]int{},
		PoisonDeadLettered:   true,
		PerMode:              map[Mode]ModeSummary{},
	}
	for _, n := range effects {
		s.Effects += n
	}
	for _, n := range attempts {
		s.HandlerRuns += n
	}
	for _, reasons := range dlq {
		for _, r := range reasons {
			s.DeadLettered[r]++
		}
	}
	for _, o := range w.Orders {
		if effects[o.ID] == 0 && len(dlq[o.ID]) == 0 {
			s.Lost = append(s.Lost, o.ID)
		}
		if effects[o.ID] > 1 {
			s.DuplicateEffects[o.ID] = effects[o.ID]
		}
		if o.Poison && !slices.Contains(dlq[o.ID], string(lambdaidem.ReasonPoison)) {
			s.PoisonDeadLettered = false
		}
		ms := s.PerMode[o.Mode]
		ms.Effects += effects[o.ID]
		if !o.Poison {
			ms.Orders++
			if effects[o.ID] == 1 {
				ms.ExactlyOne++
			}
		}
		s.PerMode[o.Mode] = ms
	}
	// Orders in the effects table or the DLQ that the workload never sent
	// would mean the tables are not this run's: say so rather than count.
	for id := range effects {
		if _, ok := w.find(id); !ok {
			s.Violations = append(s.Violations, fmt.Sprintf("effect for unknown order %q", id))
		}
	}
	if n := len(s.Lost); n > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%d lost order(s): %s", n, strings.Join(s.Lost, ", ")))
	}
	if n := len(s.DuplicateEffects); n > 0 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(s.DuplicateEffects)) {
			parts = append(parts, fmt.Sprintf("%s×%d", id, s.DuplicateEffects[id]))
		}
		s.Violations = append(s.Violations, fmt.Sprintf("%d order(s) with a duplicate effect: %s", n, strings.Join(parts, ", ")))
	}
	if !s.PoisonDeadLettered {
		s.Violations = append(s.Violations, "the poison order is not in the DLQ with reason poison")
	}

	for _, m := range Modes {
		s.Rows = append(s.Rows, d.rows(w.inMode(m), m, effects, dlq, attempts, perOrderDeliveries, byKey)...)
	}
	return s, nil
}

// rows builds the table rows of one function's orders, one per scenario.
func (d *demo) rows(w []Order, m Mode, effects map[string]int, dlq map[string][]string, attempts, perOrderDeliveries map[string]int, byKey map[string]map[string]int) []Row {
	var out []Row
	for _, sc := range []Scenario{ScenarioPlain, ScenarioDuplicate, ScenarioSlow, ScenarioPoison, ScenarioRetry, ScenarioCrash, ScenarioCrashAfter} {
		orders := Workload{Orders: w}.ordersOf(sc)
		if len(orders) == 0 {
			continue
		}
		row := Row{Mode: m, Scenario: sc, Orders: len(orders)}
		reasons := map[string]int{}
		outs := map[string]int{}
		for _, o := range orders {
			row.Messages += o.Sends()
			row.Deliveries += perOrderDeliveries[o.ID]
			row.HandlerRuns += attempts[o.ID]
			row.Effects += effects[o.ID]
			for _, r := range dlq[o.ID] {
				reasons[r]++
			}
			for k, n := range byKey[o.ID] {
				outs[k] += n
			}
		}
		row.DLQ = countList(reasons)
		row.Outcomes = countList(outs)
		out = append(out, row)
	}
	return out
}

// countList formats counts as "a 2, b 1" (most frequent first), or "-".
func countList(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// scanEffects counts the effect rows per order, over both functions'
// tables (their order IDs differ).
func (d *demo) scanEffects(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	for _, m := range Modes {
		if err := d.scanTable(ctx, d.res.effectsTables[m], counts); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

func (d *demo) scanTable(ctx context.Context, table string, counts map[string]int) error {
	p := dynamodb.NewScanPaginator(d.ddb, &dynamodb.ScanInput{
		TableName:            aws.String(table),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("order_id"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan effects: %w", err)
		}
		for _, it := range page.Items {
			v, ok := it["order_id"].(*dbtypes.AttributeValueMemberS)
			if !ok {
				return errors.New("scan effects: a row without a string order_id")
			}
			counts[v.Value]++
		}
	}
	return nil
}

// readDLQ receives every DLQ message and returns the reasons per order.
// A message without the library's metadata was moved by SQS's redrive
// policy; its order comes from the body.
func (d *demo) readDLQ(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	seen := map[string]bool{}
	var wait int32
	for empty := 0; ; {
		resp, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(d.res.dlqURL),
			MaxNumberOfMessages:   10,
			VisibilityTimeout:     120, // read each once; the queue is deleted after
			WaitTimeSeconds:       wait,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, fmt.Errorf("read DLQ: %w", err)
		}
		if len(resp.Messages) == 0 {
			n, err := d.depth(ctx, d.res.dlqURL, types.QueueAttributeNameApproximateNumberOfMessages)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			// SQS's short poll may miss messages; long-poll, boundedly.
			if empty++; empty > 10 {
				return nil, fmt.Errorf("read DLQ: %d messages visible but none received", n)
			}
			wait = 1
			continue
		}
		for _, m := range resp.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			reason, order := ReasonSQSRedrive, ""
			if dl, err := sqsqueue.Parse(m); err == nil {
				reason, order = string(dl.Metadata.Reason), orderID(dl.Body)
			} else if errors.Is(err, sqsqueue.ErrNotDeadLetter) {
				order = orderID(aws.ToString(m.Body))
			} else {
				return nil, fmt.Errorf("read DLQ: %w", err)
			}
			out[order] = append(out[order], reason)
		}
	}
}

func (d *demo) depth(ctx context.Context, url string, attr types.QueueAttributeName) (int, error) {
	out, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{attr},
	})
	if err != nil {
		return 0, fmt.Errorf("queue attributes: %w", err)
	}
	var n int
	if _, err := fmt.Sscan(out.Attributes[string(attr)], &n); err != nil {
		return 0, fmt.Errorf("queue attribute %s: %w", attr, err)
	}
	return n, nil
}

// orderID reads order_id from a body; "" when there is none.
func orderID(body string) string {
	var v struct {
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.OrderID
}

// Print writes the summary as a table a person reads at a glance.
func (s *Summary) Print(w io.Writer) {
	check := func(bad bool) string {
		if bad {
			return "FAIL"
		}
		return "ok"
	}
	dl := 0
	for _, n := range s.DeadLettered {
		dl += n
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "lambdaidem demo summary (%.1fs)\n", s.Elapsed.Seconds())
	fmt.Fprintln(w, strings.Repeat("-", 100))
	line := func(label string, n int, note string) {
		fmt.Fprintf(w, "  %-24s %6d   %s\n", label, n, note)
	}
	line("sent messages", s.Sent, fmt.Sprintf("%d producer copies", s.Sent-s.UniqueOrders))
	line("unique orders", s.UniqueOrders, "")
	line("deliveries", s.Deliveries, fmt.Sprintf("in %d invocations, redeliveries included", s.Invocations))
	line("handler runs", s.HandlerRuns, "claims of an order's key, crashed attempt included")
	line("effects", s.Effects, "rows in the two effects tables")
	line("duplicates suppressed", s.DuplicatesSuppressed, "acknowledged without running the handler")
	line("held back (in progress)", s.HeldBack, "delivered while another attempt held the key")
	line("failed attempts", s.FailedAttempts, "left to SQS to deliver again")
	line("dead-lettered", dl, countList(s.DeadLettered))
	line("crashes", s.Crashes, fmt.Sprintf("process exits (plain: before the effect; transactional: after it); %d processes restarted", s.Restarts))
	if s.Timeouts > 0 {
		line("timeouts", s.Timeouts, "invocations killed at the function timeout")
	}
	line("lost", len(s.Lost), check(len(s.Lost) > 0)+"  (orders with neither an effect nor a DLQ message)")
	line("duplicate effects", len(s.DuplicateEffects), check(len(s.DuplicateEffects) > 0)+"  (orders with more than one effect)")
	fmt.Fprintf(w, "  %-24s %6s   %s\n", "poison order in DLQ", yesNo(s.PoisonDeadLettered), check(!s.PoisonDeadLettered)+"  (with reason poison)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  exactly one effect per order, by effect mode:")
	notes := map[Mode]string{
		ModePlain:         "effect = own PutItem; crash before the effect",
		ModeTransactional: "effect commits with the completion; crash after the effect, before completion",
	}
	for _, m := range Modes {
		ms := s.PerMode[m]
		fmt.Fprintf(w, "    %-14s %4d of %-4d %-4s  %d effect rows; %s\n", m, ms.ExactlyOne, ms.Orders,
			check(ms.ExactlyOne != ms.Orders), ms.Effects, notes[m])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-13s %-11s %6s %8s %10s %8s %7s  %-10s %s\n", "mode", "scenario", "orders", "messages", "deliveries", "handler", "effects", "DLQ", "library outcomes")
	for _, r := range s.Rows {
		fmt.Fprintf(w, "  %-13s %-11s %6d %8d %10d %8d %7d  %-10s %s\n", r.Mode, r.Scenario, r.Orders, r.Messages, r.Deliveries, r.HandlerRuns, r.Effects, r.DLQ, r.Outcomes)
	}
	fmt.Fprintln(w, strings.Repeat("-", 100))
	if s.OK() {
		fmt.Fprintln(w, "PASS: every order has exactly one effect or a DLQ message with its reason")
		return
	}
	for _, v := range s.Violations {
		fmt.Fprintf(w, "FAIL: %s\n", v)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
