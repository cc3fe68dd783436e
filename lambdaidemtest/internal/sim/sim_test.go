package sim

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	flagBudget   = flag.Duration("sim.budget", 40*time.Second, "how long TestSimulation explores (wall time)")
	flagSeed     = flag.Uint64("sim.seed", 0, "replay this seed (with -sim.scenario, that exact scenario) and print its trace")
	flagScenario = flag.String("sim.scenario", "", "a shrunk scenario's JSON, as a failure prints it")
	flagKnown    = flag.String("sim.known", "", "accepted for older commands and ignored: no known-bug knob is left (see Known)")
	flagFilter   = flag.String("sim.config", "", "force options: fifo,tx,cache,heartbeat,amo,failany,redrive,forget,conflict,faults,nofaults,wrap,late,observe")
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
	if cpu > 0 {
		// On a shared machine the wall-clock rate is the load's; the rate
		// per CPU-second is the simulator's.
		t.Logf("process CPU time %s (%.0f%% of wall): %.0f messages per CPU-second",
			cpu.Round(time.Millisecond), 100*cpu.Seconds()/st.Elapsed.Seconds(), float64(st.Messages)/cpu.Seconds())
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
