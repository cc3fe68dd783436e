package sim

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	flagBudget   = flag.Duration("sim.budget", 40*time.Second, "how long TestSimulation explores (wall time)")
	flagSeed     = flag.Uint64("sim.seed", 0, "replay this seed (with -sim.scenario, that exact scenario) and print its trace")
	flagScenario = flag.String("sim.scenario", "", "a shrunk scenario's JSON, as a failure prints it")
	flagKnown    = flag.String("sim.known", "", "turn on known-bug knobs (comma list, or all; see Known)")
	flagFilter   = flag.String("sim.config", "", "force options: a comma list of the words of Filters (fifo,ordered,tx,force,conflict,...)")
)

func known() []string {
	if *flagKnown == "all" {
		return Known
	}
	if *flagKnown == "" {
		return nil
	}
	return strings.Split(*flagKnown, ",")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func freshSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 16
}

// TestSimulation explores fresh seeds for the budget, or replays one.
func TestSimulation(t *testing.T) {
	if err := CheckFilter(*flagFilter); err != nil {
		t.Fatal(err)
	}
	if *flagSeed != 0 {
		cfg := Draw(*flagSeed, known(), *flagFilter)
		if *flagScenario != "" {
			var err error
			if cfg, err = ParseConfig(*flagScenario); err != nil {
				t.Fatal(err)
			}
		}
		res := Run(*flagSeed, cfg, nil, true)
		t.Logf("seed %d: %d messages, %d invocations, %s simulated\nscenario: %s\ntrace:\n%s", res.Seed, res.Messages, res.Invocation, res.SimTime, cfg, res.Trace)
		for _, v := range res.Violations {
			t.Errorf("violation: %s", v)
		}
		return
	}
	budget := *flagBudget
	if testing.Short() {
		budget = min(budget, 3*time.Second)
	}
	if raceEnabled && !flagSet("sim.budget") {
		// Under -race (the whole suite in make test) a short budget
		// checks the simulator itself for races; make test gives the
		// exploration its minute in a run without -race.
		budget = min(budget, 10*time.Second)
	}
	seed := freshSeed()
	t.Logf("exploring from seed %d for %s (known-bug knobs: %v; config filter %q)", seed, budget, known(), *flagFilter)
	cpu0 := cpuTime()
	st := Explore(Options{Budget: budget, Seed: seed, Known: known(), Filter: *flagFilter, Shrink: true})
	cpu := cpuTime() - cpu0
	t.Logf("%d scenarios, %d messages, %d invocations, %s simulated in %s: %.0f scenarios/s, %.0f messages/s (seeds %d..%d)",
		st.Scenarios, st.Messages, st.Invocations, st.SimTime.Round(time.Second), st.Elapsed.Round(time.Millisecond),
		float64(st.Scenarios)/st.Elapsed.Seconds(), float64(st.Messages)/st.Elapsed.Seconds(), seed, seed+uint64(st.Scenarios)-1)
	t.Logf("%d scenarios built decorators with batched writes, which sent %d batched requests", st.Batched, st.Batches)
	if cpu > 0 {
		// On a shared machine the wall-clock rate is the load's; the rate
		// per CPU-second is the simulator's.
		t.Logf("process CPU time %s (%.0f%% of wall): %.0f messages per CPU-second (%.2f M per CPU-minute, %.2f M per wall minute); GOMAXPROCS %d, load average %s",
			cpu.Round(time.Millisecond), 100*cpu.Seconds()/st.Elapsed.Seconds(), float64(st.Messages)/cpu.Seconds(),
			60*float64(st.Messages)/cpu.Seconds()/1e6, 60*float64(st.Messages)/st.Elapsed.Seconds()/1e6, runtime.GOMAXPROCS(0), loadAverage())
	}
	if st.Failure != nil {
		t.Fatal(st.Report())
	}
}

// TestReplayIsExact runs the same seeds twice, traced, and compares the
// traces line for line: nothing but the seed may decide what happens.
func TestReplayIsExact(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		cfg := Draw(seed, Known, "")
		a := Run(seed, cfg, nil, true)
		b := Run(seed, cfg, nil, true)
		if a.Trace != b.Trace || strings.Join(a.Violations, "\n") != strings.Join(b.Violations, "\n") {
			t.Fatalf("seed %d replays differently:\n--- first\n%s\n--- second\n%s", seed, a.Trace, b.Trace)
		}
	}
}

// BenchmarkScenarios runs the same 100 seeds per iteration, so the work
// is fixed: allocations per iteration compare code versions on a loaded
// machine, where the time per iteration alone does not.
func BenchmarkScenarios(b *testing.B) {
	msgs, n := 0, 0
	cpu0 := cpuTime()
	for b.Loop() {
		msgs = 0
		for seed := uint64(1); seed <= 100; seed++ {
			msgs += Run(seed, Draw(seed, nil, ""), nil, false).Messages
		}
		n++
	}
	b.ReportMetric(float64(msgs), "messages/op")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(msgs*n)/cpu.Seconds(), "messages/CPU-s")
	}
}

// TestMain gives the simulator a larger heap goal than Go's default
// (unless GOGC is set): it allocates quickly and keeps little, so with
// the default it spends about a fifth of its time collecting.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}

// loadAverage is the machine's load over the last minute, as uptime
// prints it ("?" where it cannot be read).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
