package emf_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// tenantCounts reads the per-tenant events of one invocation's output:
// tenant -> metric -> value. It checks that each carries the base
// dimensions plus Tenant and that no tenant is emitted twice.
func tenantCounts(t *testing.T, out []byte) map[string]map[string]float64 {
	t.Helper()
	got := map[string]map[string]float64{}
	for _, l := range lines(t, out) {
		e := parse(t, l)
		tenant, ok := e.dims[emf.DimensionTenant]
		if !ok {
			continue
		}
		delete(e.dims, emf.DimensionTenant)
		if !cmp.Equal(baseDims, e.dims) {
			t.Fatalf("tenant event dimensions %v, want %v plus Tenant", e.dims, baseDims)
		}
		if _, dup := got[tenant]; dup {
			t.Fatalf("tenant %s emitted twice", tenant)
		}
		got[tenant] = map[string]float64{}
		for name, v := range e.vals {
			got[tenant][name] = v[0]
		}
	}
	return got
}

// fair is a record of a fair queue: a standard queue whose producer set a
// MessageGroupId (the tenant).
func fair(id, tenant, body string) events.SQSMessage {
	m := msg(id, body)
	m.Attributes["MessageGroupId"] = tenant
	return m
}

func TestTenantDimensionOnFairAndFIFOQueues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rec  func(id, group, body string) events.SQSMessage
		// On a FIFO queue the record after a failure in its group is
		// skipped, not run: it is failed without a handler error.
		want map[string]map[string]float64
	}{
		{"fair", fair, map[string]map[string]float64{
			"acme":   {emf.MetricRecords: 2, emf.MetricProcessed: 2, emf.MetricDuplicatesSkipped: 0, emf.MetricDeadLettered: 0, emf.MetricHandlerErrors: 0, emf.MetricFailed: 0},
			"globex": {emf.MetricRecords: 3, emf.MetricProcessed: 1, emf.MetricDuplicatesSkipped: 0, emf.MetricDeadLettered: 1, emf.MetricHandlerErrors: 1, emf.MetricFailed: 1},
		}},
		{"fifo", fifo, map[string]map[string]float64{
			"acme":   {emf.MetricRecords: 2, emf.MetricProcessed: 2, emf.MetricDuplicatesSkipped: 0, emf.MetricDeadLettered: 0, emf.MetricHandlerErrors: 0, emf.MetricFailed: 0},
			"globex": {emf.MetricRecords: 3, emf.MetricProcessed: 0, emf.MetricDuplicatesSkipped: 0, emf.MetricDeadLettered: 1, emf.MetricHandlerErrors: 1, emf.MetricFailed: 2},
		}},
	} {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", tc.name, all), func(t *testing.T) {
				t.Parallel()
				tenantDimension(t, all, tc.rec, tc.want)
			})
		}
	}
}

// tenantDimension sends one batch of two tenants through the decorator
// and checks each tenant's event: want's counts, zeros included with all,
// else only those that are not zero.
func tenantDimension(t *testing.T, all bool, rec func(id, group, body string) events.SQSMessage, want map[string]map[string]float64) {
	b := setup(t)
	b.all = all
	h := lambdaidem.SQS(b.store, b.handle, b.opts(b.hook(emf.WithTenantDimension()), lambdaidem.WithDeadLetterSink(b.sink))...)
	run := b.invoke(t, context.Background(), h, batch(
		rec("m1", "acme", `{"id":"1","do":"ok"}`),
		rec("m2", "globex", `{"id":"2","do":"poison"}`),
		rec("m3", "acme", `{"id":"3","do":"ok"}`),
		rec("m4", "globex", `{"id":"4","do":"fail"}`),
		rec("m5", "globex", `{"id":"5","do":"ok"}`),
	))
	if run.counts[emf.MetricRecords] != 5 {
		t.Errorf("total Records %v, want 5: the tenant sets must not change the totals", run.counts[emf.MetricRecords])
	}
	expect := map[string]map[string]float64{}
	for tenant, m := range want {
		expect[tenant] = maps.Clone(m)
		if !all {
			maps.DeleteFunc(expect[tenant], func(_ string, v float64) bool { return v == 0 })
		}
	}
	if diff := cmp.Diff(expect, tenantCounts(t, b.out.Bytes())); diff != "" {
		t.Errorf("per-tenant counts (-want +got):\n%s", diff)
	}
}

func TestTenantDimensionSkipsRecordsWithoutAGroupAndIsOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.handle, b.opts(b.hook(emf.WithTenantDimension()))...)
	b.invoke(t, context.Background(), h, batch(msg("m1", `{"id":"1","do":"ok"}`)))
	if got := tenantCounts(t, b.out.Bytes()); len(got) != 0 {
		t.Errorf("records without a group made tenant events: %v", got)
	}
	b = setup(t)
	h = lambdaidem.SQS(b.store, b.handle, b.opts(b.hook())...)
	b.invoke(t, context.Background(), h, batch(fair("m1", "acme", `{"id":"1","do":"ok"}`)))
	if got := tenantCounts(t, b.out.Bytes()); len(got) != 0 {
		t.Errorf("tenant events without WithTenantDimension: %v", got)
	}
}
