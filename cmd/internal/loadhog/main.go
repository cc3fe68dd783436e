package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, cfg, os.Stdout))
}

// config is loadhog's flags.
type config struct {
	load     float64       // the one-minute load average to keep
	spinners int           // busy goroutines, each on a thread of its own
	runs     int           // how many times to run the steps
	warmup   time.Duration // the longest wait for the load to reach load
	every    time.Duration // interval of progress lines
	sample   time.Duration // interval of load samples during a step
	logs     string        // where each invocation's step logs go
	steps    []step
	loadavg  string // the kernel's load averages (a file in tests)
	// kill is how long a step has to end after SIGTERM before its
	// process group is killed.
	kill time.Duration
}

// step is one command of a run: a name for its log and the command line,
// run with bash -c.
type step struct{ name, command string }

type stepsFlag struct{ steps *[]step }

func (f stepsFlag) String() string {
	if f.steps == nil {
		return ""
	}
	var s []string
	for _, st := range *f.steps {
		s = append(s, st.name+"="+st.command)
	}
	return strings.Join(s, " ")
}

func (f stepsFlag) Set(v string) error {
	name, command, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(command) == "" || strings.ContainsAny(name, "/ \t") {
		return fmt.Errorf("want NAME=COMMAND (NAME without spaces or slashes), got %q", v)
	}
	*f.steps = append(*f.steps, step{name: name, command: command})
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{loadavg: "/proc/loadavg", kill: 2 * time.Minute}
	fs := flag.NewFlagSet("loadhog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&cfg.load, "load", 8, "the one-minute load average to reach before the first step and keep during every step")
	fs.IntVar(&cfg.spinners, "spinners", -1, "busy goroutines, each runnable on a thread of its own (default: -load rounded up, plus 2)")
	fs.IntVar(&cfg.runs, "runs", 5, "how many times to run the steps, in order")
	fs.DurationVar(&cfg.warmup, "warmup", 5*time.Minute, "the longest wait for the load average to reach -load")
	fs.DurationVar(&cfg.every, "every", time.Minute, "interval of progress lines")
	fs.DurationVar(&cfg.sample, "sample", 5*time.Second, "interval of load samples during a step")
	fs.StringVar(&cfg.logs, "logs", ".run/test-load", "directory for the step logs (one subdirectory per invocation)")
	fs.Var(stepsFlag{&cfg.steps}, "step", "NAME=COMMAND: a step of each run, run with bash -c (repeat for several, in order)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadhog [flags] [-step NAME=COMMAND]...\n\n"+
			"Keeps the load average at -load or more while it runs the steps -runs times;\n"+
			"without -step it only spins until interrupted.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadhog: unexpected arguments %q (give commands with -step NAME=COMMAND)\n", fs.Args())
		return cfg, errors.New("unexpected arguments")
	}
	if cfg.spinners < 0 {
		cfg.spinners = int(math.Ceil(cfg.load)) + 2
	}
	if cfg.runs < 1 || cfg.load < 0 || cfg.every <= 0 || cfg.sample <= 0 {
		fmt.Fprintln(stderr, "loadhog: -runs must be at least 1; -load, -every and -sample must not be negative or zero")
		return cfg, errors.New("invalid flags")
	}
	return cfg, nil
}

// loadAvg is the kernel's 1-, 5- and 15-minute load averages.
type loadAvg [3]float64

func (l loadAvg) String() string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// readLoad reads the load averages from a file in /proc/loadavg's format.
func readLoad(path string) (loadAvg, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return loadAvg{}, err
	}
	return parseLoad(string(b))
}

func parseLoad(s string) (loadAvg, error) {
	var l loadAvg
	f := strings.Fields(s)
	if len(f) < 3 {
		return l, fmt.Errorf("load averages %q: want three numbers", strings.TrimSpace(s))
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return l, fmt.Errorf("load averages %q: %w", strings.TrimSpace(s), err)
		}
		l[i] = v
	}
	return l, nil
}

// spin starts n goroutines that never block, on at least n+2 threads (two
// spare for loadhog's own work), and returns the function that stops them.
func spin(n int) (stop func()) {
	if n == 0 {
		return func() {}
	}
	if runtime.GOMAXPROCS(0) < n+2 {
		runtime.GOMAXPROCS(n + 2)
	}
	var quit atomic.Bool
	var sum atomic.Uint64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for !quit.Load() {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sum.Add(x) // keeps the loop's work observable
		}()
	}
	return func() {
		quit.Store(true)
		wg.Wait()
	}
}

// result is how one step of one run went.
type result struct {
	run        int
	step       step
	err        error
	took       time.Duration
	start, end loadAvg
	low        float64 // the lowest one-minute load sampled during the step
	log        string
}

// run keeps the load up and runs the steps; it returns the exit status.
func run(ctx context.Context, cfg config, out io.Writer) int {
	printf := func(format string, a ...any) {
		fmt.Fprintf(out, "loadhog: "+format+"\n", a...)
	}
	if _, err := readLoad(cfg.loadavg); err != nil {
		printf("cannot read the load average: %v", err)
		return 1
	}
	stop := spin(cfg.spinners)
	defer stop()
	printf("%d spinners on %d threads; waiting for the one-minute load average to reach %.1f (at most %s)",
		cfg.spinners, runtime.GOMAXPROCS(0), cfg.load, cfg.warmup)
	t0 := time.Now()
	l, err := waitLoad(ctx, cfg, func(l loadAvg) { printf("load %s after %s", l, since(t0)) })
	if err != nil {
		printf("%v", err)
		return 1
	}
	printf("load %s after %s: reached %.1f", l, since(t0), cfg.load)

	if len(cfg.steps) == 0 {
		return idle(ctx, cfg, printf)
	}

	dir := filepath.Join(cfg.logs, time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		printf("%v", err)
		return 1
	}
	printf("logs in %s", dir)
	var results []result
	status := 0
runs:
	for i := 1; i <= cfg.runs; i++ {
		for _, s := range cfg.steps {
			r := runStep(ctx, cfg, i, s, dir, printf)
			results = append(results, r)
			var why string
			switch {
			case r.err != nil:
				why = r.err.Error()
			case r.low < cfg.load:
				why = fmt.Sprintf("the one-minute load average fell to %.2f, below %.1f: the run does not count", r.low, cfg.load)
			}
			if why == "" {
				printf("run %d/%d %s: ok in %s; load %s at the start, %s at the end, at least %.2f",
					i, cfg.runs, s.name, round(r.took), r.start, r.end, r.low)
				continue
			}
			printf("run %d/%d %s: FAILED after %s: %s; load %s at the start, %s at the end, at least %.2f",
				i, cfg.runs, s.name, round(r.took), why, r.start, r.end, r.low)
			if r.err != nil {
				printf("the end of %s:", r.log)
				tail(out, r.log, 60)
			}
			printf("log kept: %s", r.log)
			status = 1
			if ctx.Err() != nil {
				status = 130
			}
			break runs
		}
	}
	summary(out, cfg, results)
	return status
}

// waitLoad waits until the one-minute load average reaches cfg.load, at
// most cfg.warmup, reporting it every cfg.every.
func waitLoad(ctx context.Context, cfg config, report func(loadAvg)) (loadAvg, error) {
	deadline := time.Now().Add(cfg.warmup)
	poll := time.NewTicker(min(cfg.sample, time.Second))
	defer poll.Stop()
	lastReport := time.Now()
	for {
		l, err := readLoad(cfg.loadavg)
		if err != nil {
			return l, err
		}
		if l[0] >= cfg.load {
			return l, nil
		}
		if time.Since(lastReport) >= cfg.every {
			report(l)
			lastReport = time.Now()
		}
		if !time.Now().Before(deadline) {
			return l, fmt.Errorf("the one-minute load average is %.2f after %s, not %.1f: add spinners (-spinners) or wait longer (-warmup)", l[0], cfg.warmup, cfg.load)
		}
		select {
		case <-ctx.Done():
			return l, fmt.Errorf("interrupted while waiting for the load: %w", context.Cause(ctx))
		case <-poll.C:
		}
	}
}

// idle keeps spinning, printing the load every cfg.every, until ctx ends.
func idle(ctx context.Context, cfg config, printf func(string, ...any)) int {
	tick := time.NewTicker(cfg.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			l, _ := readLoad(cfg.loadavg)
			printf("stopping; load %s", l)
			return 0
		case <-tick.C:
			l, _ := readLoad(cfg.loadavg)
			printf("load %s", l)
		}
	}
}

// runStep runs one step with its output in a log file of its own, sampling
// the load while it runs.
func runStep(ctx context.Context, cfg config, i int, s step, dir string, printf func(string, ...any)) result {
	r := result{run: i, step: s, log: filepath.Join(dir, fmt.Sprintf("run-%d-%s.log", i, s.name))}
	r.start, _ = readLoad(cfg.loadavg)
	r.low = r.start[0]
	printf("run %d/%d %s: %s (load %s)", i, cfg.runs, s.name, s.command, r.start)
	f, err := os.Create(r.log)
	if err != nil {
		r.err = err
		return r
	}
	defer f.Close()

	t0 := time.Now()
	started := make(chan error, 1)
	done := make(chan error, 1)
	var pid int
	go func() {
		// The child gets SIGTERM when the thread that started it ends,
		// so that thread stays with the child until it exits; a loadhog
		// killed outright still takes its step down with it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("bash", "-c", s.command)
		cmd.Stdout, cmd.Stderr = f, f
		// Its own process group, so a signal reaches every process of
		// the step (make, go test, the stack's services).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		pid = cmd.Process.Pid
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		r.err = err
		return r
	}

	sample := time.NewTicker(cfg.sample)
	defer sample.Stop()
	progress := time.NewTicker(cfg.every)
	defer progress.Stop()
	interrupted := ctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-done:
			r.took = time.Since(t0)
			r.end, _ = readLoad(cfg.loadavg)
			r.low = min(r.low, r.end[0])
			switch {
			case ctx.Err() != nil:
				r.err = fmt.Errorf("interrupted (%v)", context.Cause(ctx))
			case err != nil:
				r.err = err
			}
			return r
		case <-sample.C:
			if l, err := readLoad(cfg.loadavg); err == nil {
				r.low = min(r.low, l[0])
			}
		case <-progress.C:
			l, _ := readLoad(cfg.loadavg)
			printf("run %d/%d %s: running for %s; load %s, at least %.2f so far", i, cfg.runs, s.name, round(time.Since(t0)), l, r.low)
		case <-interrupted:
			interrupted = nil
			printf("run %d/%d %s: interrupted; stopping it (SIGTERM to its process group)", i, cfg.runs, s.name)
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			kill = time.After(cfg.kill)
		case <-kill:
			printf("run %d/%d %s: still running %s after SIGTERM; killing it", i, cfg.runs, s.name, cfg.kill)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// summary prints one line per step run.
func summary(out io.Writer, cfg config, results []result) {
	fmt.Fprintf(out, "\nloadhog: %d spinners, target load %.1f\n", cfg.spinners, cfg.load)
	fmt.Fprintf(out, "%-4s %-16s %-7s %10s  %-17s %-17s %s\n", "run", "step", "result", "took", "load at start", "load at end", "lowest 1-min")
	for _, r := range results {
		res := "ok"
		if r.err != nil || r.low < cfg.load {
			res = "FAILED"
		}
		fmt.Fprintf(out, "%-4d %-16s %-7s %10s  %-17s %-17s %.2f\n", r.run, r.step.name, res, round(r.took), r.start, r.end, r.low)
	}
}

// tail prints the last n lines of a file.
func tail(out io.Writer, path string, n int) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(out, "  (%v)\n", err)
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
}

func since(t time.Time) time.Duration { return round(time.Since(t)) }

func round(d time.Duration) time.Duration { return d.Round(time.Second) }
