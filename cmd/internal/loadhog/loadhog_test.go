package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseLoad(t *testing.T) {
	l, err := parseLoad("10.21 9.87 6.02 14/230 29607\n")
	if err != nil || l != (loadAvg{10.21, 9.87, 6.02}) {
		t.Fatalf("parseLoad = %v, %v", l, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "x 1 2 3/4 5"} {
		if _, err := parseLoad(bad); err == nil {
			t.Errorf("parseLoad(%q) accepted it", bad)
		}
	}
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-load", "8", "-step", "test=make test", "-step", "demo=make demo LOG=a=b"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.spinners != 10 {
		t.Errorf("spinners = %d, want the load plus 2", cfg.spinners)
	}
	want := []step{{"test", "make test"}, {"demo", "make demo LOG=a=b"}}
	if len(cfg.steps) != 2 || cfg.steps[0] != want[0] || cfg.steps[1] != want[1] {
		t.Errorf("steps = %q, want %q", cfg.steps, want)
	}
	for _, bad := range [][]string{{"-step", "make test"}, {"-step", "a b=c"}, {"-step", "x="}, {"-runs", "0"}, {"make", "test"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted it", bad)
		}
	}
}

// fakeLoad writes a file in /proc/loadavg's format and returns its path.
func fakeLoad(t *testing.T, one string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(p, []byte(one+" 1.00 1.00 3/100 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testConfig runs quickly: one spinner, a fake load already at the target.
func testConfig(t *testing.T, steps ...step) config {
	return config{
		load: 8, spinners: 1, runs: 3, warmup: time.Minute, every: time.Minute, sample: 10 * time.Millisecond,
		logs: t.TempDir(), steps: steps, loadavg: fakeLoad(t, "9.50"), kill: time.Minute,
	}
}

func logsOf(t *testing.T, cfg config) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(cfg.logs, "*", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestRunsEveryStepEveryRun(t *testing.T) {
	cfg := testConfig(t, step{"a", "echo from a"}, step{"b", "echo from b"})
	var out bytes.Buffer
	if code := run(t.Context(), cfg, &out); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if got := logsOf(t, cfg); len(got) != 6 {
		t.Errorf("logs %q, want one per step and run", got)
	}
	if n := strings.Count(out.String(), ": ok in "); n != 6 {
		t.Errorf("%d steps reported ok, want 6:\n%s", n, out.String())
	}
}

func TestStopsAtTheFirstFailure(t *testing.T) {
	cfg := testConfig(t, step{"ok", "true"}, step{"bad", "echo the reason; exit 3"}, step{"after", "true"})
	var out bytes.Buffer
	if code := run(t.Context(), cfg, &out); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out.String())
	}
	if got := strings.Join(logsOf(t, cfg), " "); got != "run-1-bad.log run-1-ok.log" {
		t.Errorf("logs %q: want the first run's two, and none after the failure", got)
	}
	for _, want := range []string{"run 1/3 bad: FAILED", "exit status 3", "  the reason\n", "log kept: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFailsWhenTheLoadIsNotReached(t *testing.T) {
	cfg := testConfig(t, step{"never", "true"})
	cfg.loadavg = fakeLoad(t, "1.50")
	cfg.warmup = 0 // the fake load never moves: one look decides
	var out bytes.Buffer
	if code := run(t.Context(), cfg, &out); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "load average is 1.50") {
		t.Errorf("output does not say the load was not reached:\n%s", out.String())
	}
	if got := logsOf(t, cfg); len(got) != 0 {
		t.Errorf("steps ran without the load: %q", got)
	}
}

func TestFailsWhenTheLoadFallsDuringAStep(t *testing.T) {
	cfg := testConfig(t)
	// The step itself lowers the (fake) load: the sample at its end sees it.
	cfg.steps = []step{{"drop", "echo '2.00 1.00 1.00 1/1 1' > " + cfg.loadavg}}
	var out bytes.Buffer
	if code := run(t.Context(), cfg, &out); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "fell to 2.00") {
		t.Errorf("output does not say the load fell:\n%s", out.String())
	}
}

func TestInterruptStopsTheStep(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The step's shell writes its pid and waits on a child: SIGTERM to the
	// process group must end both.
	cfg := testConfig(t, step{"long", "echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; sleep 600 & wait"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	codes := make(chan int, 1)
	var out bytes.Buffer
	go func() { codes <- run(ctx, cfg, &out) }()

	// Wait for the step to have started, then interrupt.
	var pid int
	deadline := time.After(time.Minute)
	for pid == 0 {
		select {
		case code := <-codes:
			t.Fatalf("run ended with %d before the step started:\n%s", code, out.String())
		case <-deadline:
			t.Fatal("the step did not write its pid within a minute")
		case <-time.After(10 * time.Millisecond):
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			pid = atoi(t, strings.TrimSpace(string(b)))
		}
	}
	cancel()
	select {
	case code := <-codes:
		if code != 130 {
			t.Errorf("exit %d, want 130", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("the step did not stop within a minute of the interrupt")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the step's shell (pid %d) still runs", pid)
	}
	if !strings.Contains(out.String(), "interrupted") {
		t.Errorf("output does not say the step was interrupted:\n%s", out.String())
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("pid %q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
