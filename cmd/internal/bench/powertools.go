package bench

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The Node harness and its pinned packages travel inside the Go binary, so
// the bench installs and runs them from any directory: the script must sit
// next to its node_modules for Node's ES module resolution.
//
//go:embed powertools/package.json powertools/package-lock.json powertools/bench.mjs powertools/coldstart.mjs
var powertoolsFiles embed.FS

// ErrPowertoolsNotInstalled is returned when the Powertools harness is
// needed but its packages are not installed and installing was not asked
// for.
var ErrPowertoolsNotInstalled = errors.New("bench: Powertools packages are not installed")

// stampName records which lockfile the installed node_modules came from.
const stampName = ".installed-lock"

// PowertoolsInstalled reports whether dir holds node_modules installed from
// the embedded lockfile.
func PowertoolsInstalled(dir string) bool {
	lock, err := powertoolsFiles.ReadFile("powertools/package-lock.json")
	if err != nil {
		return false
	}
	stamp, err := os.ReadFile(filepath.Join(dir, stampName))
	if err != nil || !bytes.Equal(stamp, lock) {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "node_modules", "@aws-lambda-powertools", "idempotency", "package.json"))
	return err == nil
}

// InstallPowertools writes the harness into dir and, unless it is already
// installed from the same lockfile, runs `npm ci --ignore-scripts` there:
// the lockfile pins every version and integrity hash, and no package code
// runs at install time. npm's output goes to log.
func InstallPowertools(ctx context.Context, dir string, log io.Writer) error {
	if err := writeHarness(dir); err != nil {
		return err
	}
	if PowertoolsInstalled(dir) {
		return nil
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := powertoolsFiles.ReadFile("powertools/" + f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("bench: write %s: %w", f, err)
		}
	}
	_ = os.Remove(filepath.Join(dir, stampName))
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: npm ci in %s: %w", dir, err)
	}
	lock, _ := powertoolsFiles.ReadFile("powertools/package-lock.json")
	return os.WriteFile(filepath.Join(dir, stampName), lock, 0o644)
}

// writeHarness (re)writes the scripts, so an edit of them is picked up
// without reinstalling the packages.
func writeHarness(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, f := range []string{"bench.mjs", "coldstart.mjs"} {
		b, err := powertoolsFiles.ReadFile("powertools/" + f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// node is a running harness, driven one JSON line at a time.
type node struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *lockedBuffer
}

// startNode starts the harness in dir against table, timing through
// endpoint and counting through countEndpoint.
func startNode(ctx context.Context, dir, region, table, endpoint, countEndpoint string) (*node, error) {
	return startHarness(ctx, dir,
		"BENCH_TABLE="+table,
		"BENCH_ENDPOINT="+endpoint,
		"BENCH_COUNT_ENDPOINT="+countEndpoint,
		"AWS_REGION="+region,
		// DynamoDB Local keeps one database per access key and region: the
		// harness must see the Go side's tables.
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
	)
}

// startHarness starts the harness in dir with env added to this process's.
func startHarness(ctx context.Context, dir string, env ...string) (*node, error) {
	if !PowertoolsInstalled(dir) {
		return nil, fmt.Errorf("%w in %s (make bench installs them)", ErrPowertoolsNotInstalled, dir)
	}
	if err := writeHarness(dir); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Node's stderr (the SDK's Node-version notice, stack traces) is kept
	// and shown only when something fails.
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start node: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	nd := &node{cmd: cmd, in: in, out: sc, stderr: stderr}
	return nd, nil
}

// reply is one answer of the harness.
type reply struct {
	MS    []float64 `json:"ms"`
	OK    bool      `json:"ok"`
	Node  string    `json:"node"`
	Error string    `json:"error"`
}

// call sends one command and reads its answer.
func (nd *node) call(cmd map[string]any) (reply, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return reply{}, err
	}
	if _, err := nd.in.Write(append(b, '\n')); err != nil {
		return reply{}, fmt.Errorf("bench: node harness: %w%s", err, nd.tail())
	}
	if !nd.out.Scan() {
		err := nd.out.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return reply{}, fmt.Errorf("bench: node harness ended: %w%s", err, nd.tail())
	}
	var r reply
	if err := json.Unmarshal(nd.out.Bytes(), &r); err != nil {
		return reply{}, fmt.Errorf("bench: node harness answered %q: %w", nd.out.Text(), err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("bench: node harness, %v: %s", cmd, r.Error)
	}
	return r, nil
}

// samples runs op n times and returns its latencies.
func (nd *node) samples(op string, n int) ([]time.Duration, error) {
	r, err := nd.call(map[string]any{"op": op, "n": n})
	if err != nil {
		return nil, err
	}
	if len(r.MS) != n {
		return nil, fmt.Errorf("bench: node harness gave %d samples for %s, want %d", len(r.MS), op, n)
	}
	out := make([]time.Duration, n)
	for i, ms := range r.MS {
		out[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return out, nil
}

func (nd *node) tail() string {
	s := strings.TrimSpace(nd.stderr.String())
	if s == "" {
		return ""
	}
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return "\nnode stderr:\n" + s
}

// close asks the harness to quit and waits for it.
func (nd *node) close() error {
	_, _ = nd.in.Write([]byte(`{"op":"quit"}` + "\n"))
	_ = nd.in.Close()
	waited := make(chan error, 1)
	go func() { waited <- nd.cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			return fmt.Errorf("bench: node harness: %w%s", err, nd.tail())
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = nd.cmd.Process.Kill()
		<-waited
		return errors.New("bench: node harness did not quit; killed")
	}
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine of os/exec
// and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
