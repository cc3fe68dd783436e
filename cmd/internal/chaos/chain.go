package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/internal/emailapi"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// The chain modes run the chain example (examples/chain): the orders stage
// sends one notification per order to a second queue, keyed by the order's
// effect key, and the notify stage sends the order's email through a fake
// email API (internal/emailapi). Crashes strike after the send and after
// the email; the email API answers some first requests 504 after sending
// and some 503 without sending; the store faults and duplicate sends are
// the other modes'. Every mode is checked for lost 0 (an email, or a
// dead-letter copy of either stage) and for a notification under its
// order's effect key alone; ModeChainAMO and ModeChainKeyed for at most
// one email per order; ModeChainPlain measures the duplicates.
const (
	// ModeChainAMO: the notify stage at most once (lambdaidem.WithAtMostOnce),
	// the email API without keys.
	ModeChainAMO Mode = "chain-amo"
	// ModeChainKeyed: the notify stage at least once, the email API
	// honouring Idempotency-Key (the notify stage's effect key).
	ModeChainKeyed Mode = "chain-keyed"
	// ModeChainPlain: the notify stage at least once, sending
	// Idempotency-Key to an API that ignores it: the duplicates the other
	// two prevent, measured.
	ModeChainPlain Mode = "chain-plain"
)

// ChainModes lists the chain modes.
var ChainModes = []Mode{ModeChainAMO, ModeChainKeyed, ModeChainPlain}

// ChainPackage is the chain example's package, relative to the module root.
const ChainPackage = "./examples/chain"

// Crash points of the chain example.
const (
	CrashAfterSend  = "after_send"
	CrashAfterEmail = "after_email"
)

// chain reports whether the mode runs the chain example.
func (m Mode) chain() bool { return slices.Contains(ChainModes, m) }

// ChainReport is what one chain run injected and observed.
type ChainReport struct {
	Mode Mode
	Seed uint64

	// Injected.
	Orders         int            // distinct orders
	Sends          int            // orders sent, duplicates included
	Crashes        map[string]int // orders per crash point
	Poison         int            // orders without an email address
	EmailFaults    map[emailapi.Fault]int
	StoreRequests  int
	StoreFaults    map[FaultKind]int
	Deliveries     int // records handed to either stage
	Invocations    map[localrun.Outcome]int
	ProcessRestart int

	// Observed.
	Emails          int // emails the API sent
	OrdersEmailed   int
	DuplicateEmails int // emails beyond an order's first
	MaxEmails       int // most emails of one order
	// Notifications is the number of notification keys the notify stage
	// recorded; every one must be an order's effect key.
	Notifications int
	StrangeKeys   []string // notification keys that are no order's effect key
	DLQ           map[string]map[idemstore.Reason]int
	// UnknownSent and UnknownUnsent split the orders whose email was
	// dead-lettered as outcome_unknown, left for a person: the API had
	// sent the email, or had not.
	UnknownSent, UnknownUnsent int
	Lost                       []string

	Drained, Duration time.Duration
	Violations        []string
}

// OK reports whether every invariant held.
func (r ChainReport) OK() bool { return len(r.Violations) == 0 }

// emailFault is the email API's fault plan: from the seed, a share of the
// orders get a fault on their first request, half a 504 after sending,
// half a 503 without sending.
func emailFault(seed uint64, rate float64, counts map[emailapi.Fault]int) func(string, int) emailapi.Fault {
	return func(order string, call int) emailapi.Fault {
		if call > 0 || rate <= 0 {
			return emailapi.None
		}
		h := splitmix(seed ^ splitmix(uint64(len(order))) ^ hashString(order))
		u := float64(h>>11) / (1 << 53)
		if u >= rate {
			return emailapi.None
		}
		f := emailapi.SentThen504
		if u < rate/2 {
			f = emailapi.NotSent503
		}
		counts[f]++ // the API serialises its calls
		return f
	}
}

func hashString(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// chainWorkload is the chain's orders: a harness.Mix whose crashes are
// after the send (the orders stage) or after the email (the notify stage),
// whose poison orders have no email address, and none slow.
func chainWorkload(c Config) Workload {
	w := harness.Mix{
		Messages: c.Messages, KeyFormat: "o-%06d", Seed: c.Seed,
		DuplicateRate: c.DuplicateRate, DuplicateSpread: c.DuplicateSpread,
		CrashRate: c.CrashRate, CrashPoints: []string{CrashAfterSend, CrashAfterEmail},
		PoisonRate: c.PoisonRate, MinPoison: c.MinPoison,
	}.Workload()
	for i := range w.Messages {
		m := &w.Messages[i]
		if !m.Poison {
			m.Extra = fmt.Sprintf(`"email":"%s@example.com"`, m.Key)
		}
		if m.Crash == CrashAfterEmail {
			// The notify stage's crash rides in the order, which the
			// orders stage copies into the notification.
			m.Crash = ""
			m.Extra += `,"notify_crash":"after_email"`
		}
	}
	return w
}

// RunChain is Run for the chain modes (ChainModes): it runs the chain
// example and checks the chain's invariants. The error wraps ErrInvariant
// when one broke.
func RunChain(ctx context.Context, cfg Config) (ChainReport, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return ChainReport{}, err
	}
	if !cfg.Mode.chain() {
		return ChainReport{}, fmt.Errorf("%w: mode %q is not a chain mode", ErrInvalidConfig, cfg.Mode)
	}
	start := time.Now()
	h, bootstrap, err := harness.Open(ctx, harness.Config{
		Stack:       harness.Stack{DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, Region: cfg.Region},
		Name:        "lambdaidem-chaos-" + string(cfg.Mode),
		Log:         &harness.Log{Out: cfg.Progress, Prefix: "chaos: "},
		FunctionLog: cfg.FunctionLog,
		WaitTimeout: cfg.DrainTimeout,
		Keep:        cfg.Keep,
	}, ChainPackage, cfg.Bootstrap)
	if err != nil {
		return ChainReport{}, err
	}
	defer func() { _ = h.Close() }()
	w := chainWorkload(cfg)
	rep := ChainReport{Mode: cfg.Mode, Seed: cfg.Seed, Orders: len(w.Messages), Sends: w.Sends(),
		Crashes: map[string]int{}, EmailFaults: map[emailapi.Fault]int{}, DLQ: map[string]map[idemstore.Reason]int{}}

	api, err := emailapi.Start(emailapi.Config{Keyed: cfg.Mode == ModeChainKeyed, Fault: emailFault(cfg.Seed, cfg.EmailFaultRate, rep.EmailFaults)})
	if err != nil {
		return ChainReport{}, err
	}
	defer api.Close()
	plan := &faultPlan{seed: cfg.Seed, rate: cfg.FaultRate}
	proxy, err := faultproxy.New(cfg.DynamoDBEndpoint)
	if err != nil {
		return ChainReport{}, err
	}
	defer proxy.Close()
	plan.install(proxy)

	stage := func(name, suffix string, env ...string) harness.Function {
		return harness.Function{
			Name: name, Suffix: suffix, KeyField: "order_id",
			Env:         append([]string{harness.DynamoDBEndpointVar + "=" + proxy.URL(), "MAX_ATTEMPTS=" + strconv.Itoa(cfg.MaxAttempts)}, env...),
			Visibility:  cfg.Visibility,
			MaxReceives: backstopReceives,
			Debug:       true,
			Pollers:     cfg.Pollers, BatchSize: cfg.BatchSize, MaxConcurrency: cfg.Concurrency,
			FunctionTimeout: cfg.FunctionTimeout, PollWait: time.Second,
		}
	}
	orders := stage("orders", "", "STAGE=orders")
	orders.QueueURLs = map[string]string{"NOTIFICATIONS_QUEUE_URL": "-notify"}
	// chain-plain's notify stage retries as with a keyed API, and the API
	// ignores the key: at least once without a key downstream.
	notify := stage("notify", "-notify", "STAGE=notify", "EMAIL_API_URL="+api.URL(), "EMAIL_API_KEYED="+strconv.FormatBool(cfg.Mode != ModeChainAMO))
	if err := h.Start(ctx, bootstrap, orders, notify); err != nil {
		return ChainReport{}, err
	}
	h.Log.Printf("mode %s, seed %d: %d orders in %d sends to %d pollers × %d processes per stage",
		cfg.Mode, cfg.Seed, len(w.Messages), w.Sends(), cfg.Pollers, cfg.Concurrency)
	stopProgress := harness.Every(cfg.ProgressEvery, func(final bool) {
		if !final {
			h.Log.Printf("mode %s: sent %d/%d, deleted %d, in flight %d, emails %d", cfg.Mode, h.Sent(), w.Sends(), h.Obs.Deleted(), h.Obs.InFlight(), api.Calls())
		}
	})
	driveErr := h.Play(ctx, w, harness.Phase{Name: "send", Sends: w.Order, Backlog: cfg.Backlog})
	stopErr := h.Stop(ctx)
	stopProgress()
	rep.Drained = time.Since(start)
	_ = proxy.Close()
	if driveErr != nil {
		return ChainReport{}, fmt.Errorf("%w (seed %d)", driveErr, cfg.Seed)
	}
	if stopErr != nil {
		return ChainReport{}, stopErr
	}
	if err := collectChain(ctx, h, cfg, w, api, &rep); err != nil {
		return ChainReport{}, err
	}
	rep.StoreRequests, rep.StoreFaults = proxy.Total(), plan.snapshot()
	stats := h.Stats()
	rep.Deliveries = int(stats.Records)
	seen := h.Obs.Snapshot()
	rep.Invocations, rep.ProcessRestart = seen.Invocations, seen.Restarts
	rep.Duration = time.Since(start)
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.Violations, "; "))
	}
	return rep, nil
}

// collectChain reads what the run left behind and checks the invariants.
func collectChain(ctx context.Context, h *harness.Harness, cfg Config, w Workload, api *emailapi.Server, rep *ChainReport) error {
	emails := api.Sent()
	dlq, err := h.ReadDLQ(ctx)
	if err != nil {
		return err
	}
	dead := map[string]bool{}
	unknown := map[string]bool{}
	for _, d := range dlq {
		var body struct {
			OrderID string `json:"order_id"`
		}
		_ = json.Unmarshal([]byte(d.Body), &body)
		stage := "notify" // keyed by the order's effect key
		if d.Key == body.OrderID {
			stage = "orders"
		}
		if !d.Library {
			rep.Violations = append(rep.Violations, fmt.Sprintf("a dead-letter copy without the library's reason (order %q)", body.OrderID))
		}
		if rep.DLQ[stage] == nil {
			rep.DLQ[stage] = map[idemstore.Reason]int{}
		}
		rep.DLQ[stage][d.Reason]++
		dead[body.OrderID] = true
		if stage == "notify" && d.Reason == idemstore.ReasonOutcomeUnknown {
			unknown[body.OrderID] = true
		}
	}
	// Every order's notification key is its order's effect key.
	records, err := harness.ReadRecords(ctx, h.Store(), "orders", w.Keys())
	if err != nil {
		return err
	}
	want := map[string]string{} // notification key -> order
	for order, rec := range records {
		want[lambdaidem.EffectKeyOf("orders", order, rec.Fence.Generation)] = order
	}
	err = harness.ScanTable(ctx, h.DynamoDB, h.IdempotencyTableName(), 4, func(it harness.Item) {
		key, ok := strings.CutPrefix(harness.Str(it["pk"]), "notifications#")
		if !ok {
			return
		}
		rep.Notifications++
		if _, ok := want[key]; !ok {
			rep.StrangeKeys = append(rep.StrangeKeys, key)
		}
	})
	if err != nil {
		return err
	}
	if len(rep.StrangeKeys) > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d notification keys are no order's effect key (%s)", len(rep.StrangeKeys), strings.Join(first(rep.StrangeKeys, 3), ", ")))
	}
	for _, m := range w.Messages {
		switch {
		case m.Crash != "":
			rep.Crashes[m.Crash]++
		case strings.Contains(m.Extra, CrashAfterEmail):
			rep.Crashes[CrashAfterEmail]++
		}
		if m.Poison {
			rep.Poison++
		}
		n := emails[m.Key]
		rep.Emails += n
		if n > 0 {
			rep.OrdersEmailed++
		}
		rep.DuplicateEmails += max(n-1, 0)
		rep.MaxEmails = max(rep.MaxEmails, n)
		if unknown[m.Key] && n > 0 {
			rep.UnknownSent++
		} else if unknown[m.Key] {
			rep.UnknownUnsent++
		}
		if n == 0 && !dead[m.Key] {
			rep.Lost = append(rep.Lost, m.Key)
		}
		if n > 0 && m.Poison {
			rep.Violations = append(rep.Violations, fmt.Sprintf("order %s, without an email address, was emailed", m.Key))
		}
	}
	if len(rep.Lost) > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("lost %d orders: neither an email nor a dead-letter copy (%s)", len(rep.Lost), strings.Join(first(rep.Lost, 5), ", ")))
	}
	if cfg.Mode != ModeChainPlain && rep.MaxEmails > 1 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d duplicate emails (at most %d for one order) in mode %s", rep.DuplicateEmails, rep.MaxEmails, cfg.Mode))
	}
	return nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// PrintChain writes the chain reports side by side.
func PrintChain(out io.Writer, reps ...ChainReport) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(ChainReport) string) {
		fmt.Fprint(tw, name+"\t")
		for _, r := range reps {
			fmt.Fprint(tw, f(r)+"\t")
		}
		fmt.Fprintln(tw)
	}
	itoa := strconv.Itoa
	row("mode", func(r ChainReport) string { return string(r.Mode) })
	row("seed", func(r ChainReport) string { return strconv.FormatUint(r.Seed, 10) })
	row("orders", func(r ChainReport) string { return itoa(r.Orders) })
	row("sends (duplicates included)", func(r ChainReport) string { return itoa(r.Sends) })
	row("crashes after the send", func(r ChainReport) string { return itoa(r.Crashes[CrashAfterSend]) })
	row("crashes after the email", func(r ChainReport) string { return itoa(r.Crashes[CrashAfterEmail]) })
	row("email API: 504 after sending", func(r ChainReport) string { return itoa(r.EmailFaults[emailapi.SentThen504]) })
	row("email API: 503, not sent", func(r ChainReport) string { return itoa(r.EmailFaults[emailapi.NotSent503]) })
	row("poison orders", func(r ChainReport) string { return itoa(r.Poison) })
	row("store requests / faults", func(r ChainReport) string {
		n := 0
		for _, c := range r.StoreFaults {
			n += c
		}
		return itoa(r.StoreRequests) + " / " + itoa(n)
	})
	row("deliveries (both stages)", func(r ChainReport) string { return itoa(r.Deliveries) })
	row("process restarts", func(r ChainReport) string { return itoa(r.ProcessRestart) })
	row("notification keys", func(r ChainReport) string { return itoa(r.Notifications) })
	row("orders emailed", func(r ChainReport) string { return itoa(r.OrdersEmailed) })
	row("emails", func(r ChainReport) string { return itoa(r.Emails) })
	row("duplicate emails", func(r ChainReport) string { return itoa(r.DuplicateEmails) })
	row("dead-lettered: orders", func(r ChainReport) string { return reasons(r.DLQ["orders"]) })
	row("dead-lettered: notify", func(r ChainReport) string { return reasons(r.DLQ["notify"]) })
	row("outcome unknown: sent / not sent", func(r ChainReport) string { return itoa(r.UnknownSent) + " / " + itoa(r.UnknownUnsent) })
	row("lost", func(r ChainReport) string { return itoa(len(r.Lost)) })
	row("drained in", func(r ChainReport) string { return r.Drained.Round(time.Second).String() })
	row("result", func(r ChainReport) string {
		if r.OK() {
			return "ok"
		}
		return "FAIL"
	})
	_ = tw.Flush()
	for _, r := range reps {
		for _, v := range r.Violations {
			fmt.Fprintf(out, "%s: %s\n", r.Mode, v)
		}
	}
}

func reasons(m map[idemstore.Reason]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, m[r]))
	}
	return strings.Join(parts, ", ")
}
