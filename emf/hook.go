package emf

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// DefaultNamespace is the CloudWatch namespace of the Hook's metrics.
const DefaultNamespace = "lambdaidem"

// The dimension names the Hook uses.
const (
	// DimensionFunctionName holds AWS_LAMBDA_FUNCTION_NAME.
	DimensionFunctionName = "FunctionName"
	// DimensionNamespace holds the idempotency namespace given with
	// WithIdempotencyNamespace.
	DimensionNamespace = "Namespace"
	// DimensionReason splits DuplicatesSkipped and DeadLettered by reason.
	DimensionReason = "Reason"
	// DimensionTenant holds a record's SQS MessageGroupId in the per-tenant
	// metric sets of WithTenantDimension.
	DimensionTenant = "Tenant"
)

// The metrics the Hook emits per invocation. All are counts of records
// (Unit Count) except HandlerLatency and StoreRequests. README.md in this
// directory says what each means and what to do when it is not zero.
const (
	MetricRecords               = "Records"
	MetricHandlerRuns           = "HandlerRuns"
	MetricProcessed             = "Processed"
	MetricDuplicatesSkipped     = "DuplicatesSkipped"
	MetricConflicts             = "Conflicts"
	MetricInProgressRejections  = "InProgressRejections"
	MetricLeasesLost            = "LeasesLost"
	MetricCompletionsUnrecorded = "CompletionsUnrecorded"
	MetricDeadLettered          = "DeadLettered"
	MetricDeadLetterFailures    = "DeadLetterFailures"
	MetricStoreErrors           = "StoreErrors"
	MetricStoreRequests         = "StoreRequests"
	MetricFailed                = "Failed"
	MetricTakeovers             = "Takeovers"
	MetricHandlerErrors         = "HandlerErrors"
	MetricNotStarted            = "NotStarted"
	MetricFIFOGroupSkipped      = "FIFOGroupSkipped"
	MetricMissingKeys           = "MissingKeys"
	// MetricVisibilityFailures counts records whose visibility change
	// (RetryAfter, backoff, waiting for another holder's lease) failed:
	// they come back when the queue's own timeout ends, not when asked.
	MetricVisibilityFailures = "VisibilityChangeFailures"
	MetricHandlerLatency     = "HandlerLatency"
)

// The values of the Reason dimension of DuplicatesSkipped. DeadLettered's
// Reason values are the lambdaidem.Reason strings.
const (
	DuplicateCompleted    = "completed"
	DuplicateCached       = "cached"
	DuplicateDeadLettered = "dead_lettered"
	DuplicateLateReplay   = "late_replay"
)

// Option configures Hook.
type Option func(*hookConfig)

type hookConfig struct {
	emitter    Emitter
	namespace  string
	function   string
	idemNS     string
	dims       []Dimension
	dimsSet    bool
	properties map[string]any
	now        func() time.Time
	all        bool
	tenants    bool
	logger     *slog.Logger
}

// WithEmitter sets where metric sets go (default: a Writer on os.Stdout).
func WithEmitter(e Emitter) Option {
	return func(c *hookConfig) {
		if e != nil {
			c.emitter = e
		}
	}
}

// WithNamespace sets the CloudWatch namespace (default DefaultNamespace).
func WithNamespace(ns string) Option { return func(c *hookConfig) { c.namespace = ns } }

// WithIdempotencyNamespace adds the dimension Namespace with the value given
// to lambdaidem.WithNamespace, so functions sharing a table are told apart.
// The hook cannot read the decorator's options, hence this option. Ignored
// when WithDimensions is given.
func WithIdempotencyNamespace(ns string) Option { return func(c *hookConfig) { c.idemNS = ns } }

// WithDimensions replaces the default dimension set (FunctionName from
// AWS_LAMBDA_FUNCTION_NAME when set, then Namespace when
// WithIdempotencyNamespace is given). No arguments publishes the metrics
// without dimensions. At most MaxDimensions-1 dimensions: the Reason
// breakdowns add one.
func WithDimensions(d ...Dimension) Option {
	return func(c *hookConfig) { c.dims, c.dimsSet = append([]Dimension(nil), d...), true }
}

// WithProperties adds fixed top-level members to every event (a version, a
// stage), searchable in CloudWatch Logs Insights. Never bodies or secrets.
func WithProperties(p map[string]any) Option {
	return func(c *hookConfig) {
		c.properties = make(map[string]any, len(p))
		for k, v := range p {
			c.properties[k] = v
		}
	}
}

// WithClock sets the clock stamping each event (default time.Now); for
// deterministic output in tests.
func WithClock(now func() time.Time) Option {
	return func(c *hookConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// WithAllMetrics emits every metric every invocation, zeros included: the
// full detail, about 1.4 KB a line for a batch of ten (README.md in this
// directory has the figures). By default an invocation's event carries
// only the metrics that are not zero, so the line of an invocation with
// nothing unusual to say is short (about a third of that) and a count
// that is not zero stands out in a log. Either way a metric appears
// whenever it is not zero, so alarms and dashboards see the same values;
// without this option a metric with nothing to count has no data point
// rather than a zero, so an alarm on it needs TreatMissingData
// notBreaching (template.yaml's alarms have it), and CloudWatch bills a
// metric only for the hours it has data.
func WithAllMetrics() Option { return func(c *hookConfig) { c.all = true } }

// WithTenantDimension adds, for each message group present in an
// invocation, a metric set with the dimension Tenant (the group ID) on top
// of the configured dimensions, carrying that group's Records, Processed,
// DuplicatesSkipped, DeadLettered, HandlerErrors and Failed. On a fair queue
// (a standard queue whose producers set MessageGroupId to a tenant) that is
// the per-tenant view; on a FIFO queue it is per group. Records without a
// group are counted only in the totals, which stay as they are.
//
// Every distinct group becomes its own CloudWatch metrics, billed as such:
// use it when groups are a bounded set of tenants, not one per order.
func WithTenantDimension() Option { return func(c *hookConfig) { c.tenants = true } }

// WithLogger sets where a failure to emit is reported (default
// slog.Default()). Metrics never fail an invocation.
func WithLogger(l *slog.Logger) Option {
	return func(c *hookConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

// Hook returns a function for lambdaidem.WithInvocationHook that emits the
// invocation's metrics. It panics when the options cannot make a valid
// metric set (a bad namespace or dimension), so a misconfiguration shows
// at cold start rather than as a missing metric.
func Hook(opts ...Option) func(*lambdaidem.InvocationReport) {
	c := &hookConfig{
		namespace: DefaultNamespace,
		function:  os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
		now:       time.Now,
		logger:    slog.Default(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.emitter == nil {
		c.emitter = NewWriter(os.Stdout)
	}
	if !c.dimsSet {
		if c.function != "" {
			c.dims = append(c.dims, Dimension{DimensionFunctionName, c.function})
		}
		if c.idemNS != "" {
			c.dims = append(c.dims, Dimension{DimensionNamespace, c.idemNS})
		}
	}
	h := &hook{c: c}
	// Check every shape of event once, with every metric present (as
	// WithAllMetrics emits them), so that a name clash shows here and not
	// on the first invocation that has something unusual to count.
	full := *c
	full.all = true
	probe := (&hook{c: &full}).sets(probeReport, time.Unix(0, 0))
	for _, s := range probe {
		if _, err := Encode(s); err != nil {
			panic(fmt.Sprintf("emf: Hook options make invalid metrics: %v", err))
		}
	}
	return func(r *lambdaidem.InvocationReport) { h.report(context.Background(), r) }
}

// probeReport holds one record of every kind, for Hook's check.
var probeReport = &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
	{Outcome: lambdaidem.OutcomeProcessed, HandlerRan: true, StoreCalls: 2, MessageGroupID: "probe"},
	{Outcome: lambdaidem.OutcomeDeadLettered, Reason: lambdaidem.ReasonPoison},
	{Outcome: lambdaidem.OutcomeDuplicate},
}}

type hook struct{ c *hookConfig }

// report emits r's metrics. The report's request ID reaches the event
// through a Lambda context (Writer.Emit reads it from there).
func (h *hook) report(ctx context.Context, r *lambdaidem.InvocationReport) {
	if r == nil {
		return
	}
	if r.RequestID != "" {
		if _, ok := lambdacontext.FromContext(ctx); !ok {
			ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: r.RequestID})
		}
	}
	for _, s := range h.sets(r, h.c.now()) {
		if err := h.c.emitter.Emit(ctx, s); err != nil {
			h.c.logger.LogAttrs(ctx, slog.LevelError, "lambdaidem/emf: could not emit metrics", slog.Any("error", err))
		}
	}
}

// counts is one invocation's tally.
type counts struct {
	records, handlerRuns, processed, duplicates, conflicts, inProgress  int
	leasesLost, unrecorded, deadLettered, deadLetterFailures, storeErrs int
	storeRequests, failed, takeovers, handlerErrors, notStarted         int
	groupSkipped, missingKeys, visibilityFailures                       int
	latencies                                                           []float64
	// byReason keep first-seen order, so output is deterministic.
	dupReasons, dlReasons []string
	dupBy, dlBy           map[string]int
}

func tally(r *lambdaidem.InvocationReport) *counts {
	n := &counts{records: len(r.Records), failed: r.Failed, dupBy: map[string]int{}, dlBy: map[string]int{}}
	dup := func(reason string) {
		n.duplicates++
		if n.dupBy[reason] == 0 {
			n.dupReasons = append(n.dupReasons, reason)
		}
		n.dupBy[reason]++
	}
	for _, rec := range r.Records {
		n.storeRequests += rec.StoreCalls
		if rec.HandlerRan {
			n.handlerRuns++
			// In milliseconds to the microsecond: finer digits would only
			// lengthen the line.
			n.latencies = append(n.latencies, float64(rec.HandlerDuration.Round(time.Microsecond))/float64(time.Millisecond))
		}
		if rec.Takeover {
			n.takeovers++
		}
		if rec.VisibilityErr != nil {
			n.visibilityFailures++
		}
		// A record met the store's trouble if any of its store calls
		// failed: the claim (store_error), the completion after the effect
		// (completion_unrecorded), or a failure or dead-letter mark that
		// could not be written. One StoreErrors alarm covers them all.
		if rec.StoreErrors > 0 || rec.Outcome == lambdaidem.OutcomeStoreError || rec.Outcome == lambdaidem.OutcomeUnrecorded {
			n.storeErrs++
		}
		// A key held by a different payload is a conflict whatever became
		// of the message: failed without a sink, dead-lettered with one.
		if rec.Outcome == lambdaidem.OutcomeConflict || rec.Reason == lambdaidem.ReasonKeyConflict {
			n.conflicts++
		}
		switch rec.Outcome {
		case lambdaidem.OutcomeProcessed:
			n.processed++
		case lambdaidem.OutcomeDuplicate:
			dup(DuplicateCompleted)
		case lambdaidem.OutcomeCachedDuplicate:
			dup(DuplicateCached)
		case lambdaidem.OutcomeDeadLetteredDuplicate:
			dup(DuplicateDeadLettered)
		case lambdaidem.OutcomeLateReplay:
			dup(DuplicateLateReplay)
		case lambdaidem.OutcomeDeadLettered:
			n.deadLettered++
			reason := string(rec.Reason)
			if reason == "" {
				reason = "unknown"
			}
			if n.dlBy[reason] == 0 {
				n.dlReasons = append(n.dlReasons, reason)
			}
			n.dlBy[reason]++
		case lambdaidem.OutcomeUnrecorded:
			// The store failed after the effect happened: a store error
			// too, so one StoreErrors alarm covers both.
			n.unrecorded++
		case lambdaidem.OutcomeLeaseLost:
			n.leasesLost++
		case lambdaidem.OutcomeFailed:
			n.handlerErrors++
		case lambdaidem.OutcomeInProgress:
			n.inProgress++
		case lambdaidem.OutcomeDeadLetterFailed:
			n.deadLetterFailures++
		case lambdaidem.OutcomeNotStarted:
			n.notStarted++
		case lambdaidem.OutcomeSkippedGroup:
			n.groupSkipped++
		case lambdaidem.OutcomeMissingKey, lambdaidem.OutcomeMalformedBody:
			// No key could be derived: missing, or the body is malformed.
			n.missingKeys++
		}
	}
	return n
}

// sets turns a report into metric sets: one with every metric under the
// configured dimensions, and one per reason that occurred, carrying
// DuplicatesSkipped or DeadLettered under the dimensions plus Reason. The
// totals are only in the first, so no value is counted twice.
func (h *hook) sets(r *lambdaidem.InvocationReport, at time.Time) []MetricSet {
	n := tally(r)
	count := func(name string, v int) Metric {
		return Metric{Name: name, Unit: UnitCount, Values: []float64{float64(v)}}
	}
	all := []Metric{
		count(MetricRecords, n.records),
		count(MetricHandlerRuns, n.handlerRuns),
		count(MetricProcessed, n.processed),
		count(MetricDuplicatesSkipped, n.duplicates),
		count(MetricConflicts, n.conflicts),
		count(MetricInProgressRejections, n.inProgress),
		count(MetricLeasesLost, n.leasesLost),
		count(MetricCompletionsUnrecorded, n.unrecorded),
		count(MetricDeadLettered, n.deadLettered),
		count(MetricDeadLetterFailures, n.deadLetterFailures),
		count(MetricStoreErrors, n.storeErrs),
		count(MetricStoreRequests, n.storeRequests),
		count(MetricFailed, n.failed),
		count(MetricTakeovers, n.takeovers),
		count(MetricHandlerErrors, n.handlerErrors),
		count(MetricNotStarted, n.notStarted),
		count(MetricFIFOGroupSkipped, n.groupSkipped),
		count(MetricMissingKeys, n.missingKeys),
		count(MetricVisibilityFailures, n.visibilityFailures),
	}
	if !h.c.all {
		kept := all[:0]
		for _, m := range all {
			if m.Values[0] != 0 {
				kept = append(kept, m)
			}
		}
		all = kept
	}
	if len(n.latencies) > 0 {
		all = append(all, Metric{Name: MetricHandlerLatency, Unit: UnitMilliseconds, Values: n.latencies})
	}
	out := []MetricSet{h.set(all, at, nil)}
	for _, reason := range n.dupReasons {
		out = append(out, h.set([]Metric{count(MetricDuplicatesSkipped, n.dupBy[reason])}, at,
			&Dimension{DimensionReason, reason}))
	}
	for _, reason := range n.dlReasons {
		out = append(out, h.set([]Metric{count(MetricDeadLettered, n.dlBy[reason])}, at,
			&Dimension{DimensionReason, reason}))
	}
	if h.c.tenants {
		out = append(out, h.tenantSets(r, at)...)
	}
	return out
}

// tenantSets returns one metric set per message group in r, in first-seen
// order, under the configured dimensions plus Tenant.
func (h *hook) tenantSets(r *lambdaidem.InvocationReport, at time.Time) []MetricSet {
	var order []string
	byGroup := map[string][]lambdaidem.RecordReport{}
	for _, rec := range r.Records {
		g := rec.MessageGroupID
		if g == "" {
			continue
		}
		if _, seen := byGroup[g]; !seen {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], rec)
	}
	out := make([]MetricSet, 0, len(order))
	for _, g := range order {
		recs := byGroup[g]
		failed := 0
		for _, rec := range recs {
			if !rec.Acked {
				failed++
			}
		}
		n := tally(&lambdaidem.InvocationReport{Records: recs, Failed: failed})
		metrics := make([]Metric, 0, 6)
		for _, m := range []struct {
			name string
			v    int
		}{
			{MetricRecords, n.records},
			{MetricProcessed, n.processed},
			{MetricDuplicatesSkipped, n.duplicates},
			{MetricDeadLettered, n.deadLettered},
			{MetricHandlerErrors, n.handlerErrors},
			{MetricFailed, n.failed},
		} {
			if m.v != 0 || h.c.all {
				metrics = append(metrics, Metric{Name: m.name, Unit: UnitCount, Values: []float64{float64(m.v)}})
			}
		}
		out = append(out, h.set(metrics, at, &Dimension{DimensionTenant, g}))
	}
	return out
}

func (h *hook) set(metrics []Metric, at time.Time, extra *Dimension) MetricSet {
	dims := h.c.dims
	if extra != nil {
		dims = append(append([]Dimension(nil), dims...), *extra)
	}
	return MetricSet{
		Namespace:  h.c.namespace,
		Dimensions: dims,
		Metrics:    metrics,
		Properties: h.c.properties,
		Timestamp:  at,
	}
}
