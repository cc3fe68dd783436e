package bench_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/bench"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// powertoolsDir is where `make bench` installs the Powertools harness.
var powertoolsDir = filepath.Join("..", "..", "..", ".tools", "powertools")

// TestDynamoSmoke runs the DynamoDB Local benchmark with a tiny N so the
// harness cannot rot. It checks that every path ran and was counted, never
// how fast: timings on a shared machine prove nothing in a test.
func TestDynamoSmoke(t *testing.T) {
	t.Parallel()
	endpoint := testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	cfg := bench.DynamoConfig{Endpoint: endpoint, N: 3, Warmup: 2, CountRuns: 1}
	withPT := bench.PowertoolsInstalled(powertoolsDir)
	if withPT {
		cfg.PowertoolsDir = powertoolsDir
	} else {
		t.Logf("Powertools harness not installed in %s (make bench installs it): measuring the Go side only", powertoolsDir)
	}
	res, err := bench.RunDynamo(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bench.PathFirst, bench.PathDuplicate, bench.PathBatch, bench.PathFIFO} {
		want := []string{bench.VariantLambdaidem, bench.VariantFloor}
		if path != bench.PathFIFO {
			want = append(want, bench.VariantFloorTwin)
		}
		if path == bench.PathBatch {
			want = append(want, bench.VariantBatched)
		}
		if withPT {
			want = append(want, bench.VariantPowertools)
		}
		checkSamples(t, res, path, want, cfg.N)
	}
	checkSamples(t, res, bench.PathTxFirst, []string{bench.VariantLambdaidem, bench.VariantOptimistic, bench.VariantFloor, bench.VariantOneTx}, cfg.N)
	checkRequests(t, res)
	var buf bytes.Buffer
	res.WriteLatency(&buf)
	res.WriteTargets(&buf)
	res.WriteRequests(&buf)
	if !strings.Contains(buf.String(), "| "+bench.PathFirst+" |") {
		t.Errorf("latency table lacks the first-delivery row:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "| "+bench.PathBatch+" | twin / floor |") {
		t.Errorf("no A/A line of the floor's twin in\n%s", buf.String())
	}
	t.Logf("\n%s", buf.String())
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	var d bench.Dist
	for i := 100; i >= 1; i-- {
		d.Add(time.Duration(i) * time.Millisecond)
	}
	if got := d.P50(); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := d.P99(); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := (bench.Dist{}).P50(); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

// TestE2ESmoke sends a few orders through the real bootstrap under the
// local runner and checks that each has one effect.
func TestE2ESmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/orders")
	}
	t.Parallel()
	res, err := bench.RunE2E(t.Context(), bench.E2EConfig{
		DynamoDBEndpoint: testenv.Endpoint(t, testenv.DynamoDBEndpointVar),
		SQSEndpoint:      testenv.Endpoint(t, testenv.SQSEndpointVar),
		Messages:         20,
		MaxConcurrency:   2,
		Timeout:          2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Effects != 20 || res.Invocations == 0 {
		t.Errorf("%d effects in %d invocations, want 20 effects", res.Effects, res.Invocations)
	}
	var buf bytes.Buffer
	res.Write(&buf)
	t.Logf("\n%s", buf.String())
}

// TestColdStartSmoke starts the orders bootstrap (and its Powertools
// counterpart, when installed) twice under the bench's Runtime API and
// feeds each 20 messages; it checks that every start and every message
// was counted, never how fast.
func TestColdStartSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/orders")
	}
	t.Parallel()
	cfg := bench.ColdConfig{DynamoDBEndpoint: testenv.Endpoint(t, testenv.DynamoDBEndpointVar), Starts: 2, Messages: 20}
	want := 1
	if bench.PowertoolsInstalled(powertoolsDir) {
		cfg.PowertoolsDir = powertoolsDir
		want = 2
	}
	res, err := bench.RunColdStart(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Functions) != want {
		t.Fatalf("%d functions measured, want %d", len(res.Functions), want)
	}
	for _, f := range res.Functions {
		if f.Init.N() != 2 || f.RSSKiB <= 0 {
			t.Errorf("%s: %d starts, RSS %d KiB", f.Name, f.Init.N(), f.RSSKiB)
		}
	}
	var buf bytes.Buffer
	res.Write(&buf)
	t.Logf("\n%s", buf.String())
}

// TestRedisSmoke runs the Redis store's benchmark with a tiny N: every
// path and variant counted, the commands per message as documented.
func TestRedisSmoke(t *testing.T) {
	t.Parallel()
	cfg := bench.RedisConfig{Addr: testenv.RedisAddr(t), N: 4, Warmup: 2, CountRuns: 1}
	withPT := bench.PowertoolsInstalled(powertoolsDir)
	if withPT {
		cfg.PowertoolsDir = powertoolsDir
	}
	res, err := bench.RunRedis(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bench.PathFirst, bench.PathDuplicate} {
		want := []string{bench.VariantLambdaidem, bench.VariantRedisFloor, bench.VariantFloorTwin}
		if withPT {
			want = append(want, bench.VariantPowertoolsRedis)
		}
		checkSamples(t, res, path, want, cfg.N)
	}
	checkSamples(t, res, bench.PathBatch, []string{bench.VariantLambdaidem, bench.VariantBatched, bench.VariantRedisFloor, bench.VariantFloorTwin}, cfg.N)
	checkSamples(t, res, bench.PathTxFirst, []string{bench.VariantLambdaidem, bench.VariantOptimistic, bench.VariantRedisFloor}, cfg.N)
	checkRequests(t, res)
	var buf bytes.Buffer
	res.WriteLatency(&buf)
	res.WriteCarryOver(&buf)
	res.WriteTargets(&buf)
	res.WriteRequests(&buf)
	if !strings.Contains(buf.String(), "| first delivery | twin / floor |") {
		t.Errorf("no A/A line of the floor's twin in\n%s", buf.String())
	}
	t.Logf("\n%s", buf.String())
}

// checkSamples fails unless path has n samples of each variant of want.
func checkSamples(t *testing.T, res *bench.DynamoResult, path string, want []string, n int) {
	t.Helper()
	p := res.Path(path)
	if p == nil {
		t.Fatalf("no result for %s", path)
	}
	for _, v := range want {
		if d := p.Dists[v]; d == nil || d.N() != n {
			t.Errorf("%s, %s: %v samples, want %d", path, v, d, n)
		}
	}
}

// checkRequests fails for every path whose requests per message missed
// their target.
func checkRequests(t *testing.T, res *bench.DynamoResult) {
	t.Helper()
	for _, row := range res.Requests {
		if row.Want >= 0 && row.PerMessage() != row.Want {
			t.Errorf("%s %s: %v requests per message (%s), want %v", row.Impl, row.Path, row.PerMessage(), row.OpsText(), row.Want)
		}
	}
}

// TestWaitSmoke runs the wait-for-completion benchmark with a tiny N on
// the stores the stack has, so the harness cannot rot: every waiting
// request returned the first run's result (RunWait fails otherwise) and
// its requests were counted.
func TestWaitSmoke(t *testing.T) {
	t.Parallel()
	cfg := bench.WaitConfig{DynamoDBEndpoint: testenv.Endpoint(t, testenv.DynamoDBEndpointVar), RedisAddr: testenv.RedisAddr(t),
		N: 2, Lengths: []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}}
	res, err := bench.RunWait(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 {
		t.Fatalf("%d rows, want 2 stores × 2 lengths", len(res.Rows))
	}
	for _, row := range res.Rows {
		if row.Waiters != 2 || row.PerWaiter() < 2 || row.After.N() != 2 {
			t.Errorf("%s, %s: %d waiters, %.2f requests each, %d latencies; want 2 waiters of a claim and reads each",
				row.Store, row.Length, row.Waiters, row.PerWaiter(), row.After.N())
		}
	}
	var buf bytes.Buffer
	res.Write(&buf)
	t.Logf("\n%s", buf.String())
}

func TestWaitCeiling(t *testing.T) {
	t.Parallel()
	// The shortest pauses: 25, 50, 100, 200, 400, then 500 ms.
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 2}, {25 * time.Millisecond, 2}, {26 * time.Millisecond, 3}, {1500 * time.Millisecond, 8}, {5 * time.Second, 15}} {
		if got := bench.WaitCeiling(c.d); got != c.want {
			t.Errorf("WaitCeiling(%s) = %d, want %d", c.d, got, c.want)
		}
	}
}
