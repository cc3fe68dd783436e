package otelidem

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// The metrics of WithMeterProvider: the emf package's set (emf.Metric*),
// one counter of records each, under OpenTelemetry's names, with the
// attributes lambdaidem.namespace and lambdaidem.entry (and
// lambdaidem.tenant with WithTenantAttribute). DuplicatesSkipped and
// DeadLettered carry lambdaidem.reason, as emf's Reason dimension; their
// sum over reasons is emf's total. HandlerLatency is a histogram in
// seconds. Records of Wrap and httpidem calls are counted too, under
// their entry point; emf counts SQS invocations only.
const (
	MetricRecords               = "lambdaidem.records"
	MetricHandlerRuns           = "lambdaidem.handler.runs"
	MetricProcessed             = "lambdaidem.processed"
	MetricDuplicatesSkipped     = "lambdaidem.duplicates_skipped"
	MetricConflicts             = "lambdaidem.conflicts"
	MetricInProgressRejections  = "lambdaidem.in_progress_rejections"
	MetricLeasesLost            = "lambdaidem.leases_lost"
	MetricCompletionsUnrecorded = "lambdaidem.completions_unrecorded"
	MetricDeadLettered          = "lambdaidem.dead_lettered"
	MetricDeadLetterFailures    = "lambdaidem.dead_letter_failures"
	MetricStoreErrors           = "lambdaidem.store.errors"
	MetricStoreRequests         = "lambdaidem.store.requests"
	MetricFailed                = "lambdaidem.failed"
	MetricTakeovers             = "lambdaidem.takeovers"
	MetricHandlerErrors         = "lambdaidem.handler.errors"
	MetricNotStarted            = "lambdaidem.not_started"
	MetricFIFOGroupSkipped      = "lambdaidem.fifo_group_skipped"
	MetricMissingKeys           = "lambdaidem.missing_keys"
	MetricVisibilityFailures    = "lambdaidem.visibility_change_failures"
	MetricHandlerDuration       = "lambdaidem.handler.duration"
)

// emfNames maps each metric of this package to the emf metric it mirrors.
var emfNames = map[string]string{
	MetricRecords:               emf.MetricRecords,
	MetricHandlerRuns:           emf.MetricHandlerRuns,
	MetricProcessed:             emf.MetricProcessed,
	MetricDuplicatesSkipped:     emf.MetricDuplicatesSkipped,
	MetricConflicts:             emf.MetricConflicts,
	MetricInProgressRejections:  emf.MetricInProgressRejections,
	MetricLeasesLost:            emf.MetricLeasesLost,
	MetricCompletionsUnrecorded: emf.MetricCompletionsUnrecorded,
	MetricDeadLettered:          emf.MetricDeadLettered,
	MetricDeadLetterFailures:    emf.MetricDeadLetterFailures,
	MetricStoreErrors:           emf.MetricStoreErrors,
	MetricStoreRequests:         emf.MetricStoreRequests,
	MetricFailed:                emf.MetricFailed,
	MetricTakeovers:             emf.MetricTakeovers,
	MetricHandlerErrors:         emf.MetricHandlerErrors,
	MetricNotStarted:            emf.MetricNotStarted,
	MetricFIFOGroupSkipped:      emf.MetricFIFOGroupSkipped,
	MetricMissingKeys:           emf.MetricMissingKeys,
	MetricVisibilityFailures:    emf.MetricVisibilityFailures,
	MetricHandlerDuration:       emf.MetricHandlerLatency,
}

// The metric attributes beside AttrNamespace, AttrEntry and AttrReason.
const (
	// AttrTenant is a record's MessageGroupId, with WithTenantAttribute.
	AttrTenant = attribute.Key("lambdaidem.tenant")
)

// meters holds the instruments.
type meters struct {
	tenants bool
	counts  map[string]metric.Int64Counter
	latency metric.Float64Histogram
	// sets caches the attribute sets of (namespace, entry, tenant, reason).
	sets sync.Map
}

type setKey struct {
	ns, tenant, reason string
	entry              lambdaidem.EntryPoint
}

func newMeters(mp metric.MeterProvider, tenants bool) *meters {
	m := mp.Meter(ScopeName)
	ms := &meters{tenants: tenants, counts: map[string]metric.Int64Counter{}}
	for name, emfName := range emfNames {
		if name == MetricHandlerDuration {
			continue
		}
		// An instrument the provider refuses is a no-op: metrics never
		// fail a record.
		unit := "{record}"
		if name == MetricStoreRequests {
			unit = "{request}"
		}
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription("lambdaidem "+emfName+" (as the emf package's metric)"))
		if err != nil || c == nil {
			c = noop.Int64Counter{}
		}
		ms.counts[name] = c
	}
	h, err := m.Float64Histogram(MetricHandlerDuration, metric.WithUnit("s"),
		metric.WithDescription("lambdaidem HandlerLatency: the handler's run time (as the emf package's metric, in seconds)"))
	if err != nil || h == nil {
		h = noop.Float64Histogram{}
	}
	ms.latency = h
	return ms
}

// set returns the measurement option of one attribute set.
func (ms *meters) set(k setKey) metric.MeasurementOption {
	if v, ok := ms.sets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{AttrNamespace.String(k.ns), AttrEntry.String(string(k.entry))}
	if k.tenant != "" {
		attrs = append(attrs, AttrTenant.String(k.tenant))
	}
	if k.reason != "" {
		attrs = append(attrs, AttrReason.String(k.reason))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if k.tenant == "" {
		// Tenants are not cached: their number is the user's.
		ms.sets.Store(k, opt)
	}
	return opt
}

// record counts one record as the emf package's tally does.
func (ms *meters) record(ctx context.Context, rec *record, r *lambdaidem.RecordReport) {
	k := setKey{ns: rec.namespace, entry: rec.entry}
	if ms.tenants {
		k.tenant = rec.group
	}
	base := ms.set(k)
	add := func(name string, n int64) { ms.counts[name].Add(ctx, n, base) }
	reasoned := func(name, reason string) {
		rk := k
		rk.reason = reason
		ms.counts[name].Add(ctx, 1, ms.set(rk))
	}
	add(MetricRecords, 1)
	if r.StoreCalls > 0 {
		add(MetricStoreRequests, int64(r.StoreCalls))
	}
	if r.HandlerRan {
		add(MetricHandlerRuns, 1)
		ms.latency.Record(ctx, r.HandlerDuration.Seconds(), base)
	}
	if r.Takeover {
		add(MetricTakeovers, 1)
	}
	if r.VisibilityErr != nil {
		add(MetricVisibilityFailures, 1)
	}
	if r.StoreErrors > 0 || r.Outcome == lambdaidem.OutcomeStoreError || r.Outcome == lambdaidem.OutcomeUnrecorded {
		add(MetricStoreErrors, 1)
	}
	if r.Outcome == lambdaidem.OutcomeConflict || r.Reason == lambdaidem.ReasonKeyConflict {
		add(MetricConflicts, 1)
	}
	if !r.Acked {
		add(MetricFailed, 1)
	}
	switch r.Outcome {
	case lambdaidem.OutcomeProcessed:
		add(MetricProcessed, 1)
	case lambdaidem.OutcomeDuplicate:
		reasoned(MetricDuplicatesSkipped, emf.DuplicateCompleted)
	case lambdaidem.OutcomeCachedDuplicate:
		reasoned(MetricDuplicatesSkipped, emf.DuplicateCached)
	case lambdaidem.OutcomeDeadLetteredDuplicate:
		reasoned(MetricDuplicatesSkipped, emf.DuplicateDeadLettered)
	case lambdaidem.OutcomeLateReplay:
		reasoned(MetricDuplicatesSkipped, emf.DuplicateLateReplay)
	case lambdaidem.OutcomeDeadLettered:
		reason := string(r.Reason)
		if reason == "" {
			reason = "unknown"
		}
		reasoned(MetricDeadLettered, reason)
	case lambdaidem.OutcomeUnrecorded:
		add(MetricCompletionsUnrecorded, 1)
	case lambdaidem.OutcomeLeaseLost:
		add(MetricLeasesLost, 1)
	case lambdaidem.OutcomeFailed:
		add(MetricHandlerErrors, 1)
	case lambdaidem.OutcomeInProgress:
		add(MetricInProgressRejections, 1)
	case lambdaidem.OutcomeDeadLetterFailed:
		add(MetricDeadLetterFailures, 1)
	case lambdaidem.OutcomeNotStarted:
		add(MetricNotStarted, 1)
	case lambdaidem.OutcomeSkippedGroup:
		add(MetricFIFOGroupSkipped, 1)
	case lambdaidem.OutcomeMissingKey, lambdaidem.OutcomeMalformedBody:
		add(MetricMissingKeys, 1)
	}
}
