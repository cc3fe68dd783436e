package localrun

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// instance is one execution environment: a bootstrap process and the
// Runtime API endpoint only it talks to. It serves ProcessConcurrency
// invocations at a time (one by default). Each process gets a fresh
// listener, so a killed process can never answer for its successor.
type instance struct {
	r     *Runner
	slot  int
	start int // 1 for the slot's first process, then restarts

	cmd *exec.Cmd
	pid int
	srv *http.Server

	next      chan *invocation    // hand-off to a waiting GET /next
	initErr   chan *FunctionError // POST /init/error
	closing   chan struct{}       // closed when the instance shuts down
	exited    chan struct{}       // closed after the process was reaped
	exitErr   error               // valid after exited is closed
	extension atomic.Bool         // an extension registered: SIGTERM first

	mu      sync.Mutex
	current map[string]*invocation // taken by GET /next, not yet answered
	served  bool                   // took an event at least once (warm)
	reason  string                 // why the runner killed it, if it did

	closeOnce sync.Once
}

// startInstance starts a bootstrap process for process slot slot.
func (r *Runner) startInstance(slot, start int) (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime API listener: %w", err)
	}
	in := &instance{
		r:       r,
		slot:    slot,
		start:   start,
		next:    make(chan *invocation),
		current: make(map[string]*invocation),
		initErr: make(chan *FunctionError, 1),
		closing: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	in.srv = &http.Server{Handler: in.routes(), ReadHeaderTimeout: 10 * time.Second}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		_ = in.srv.Serve(ln) // returns when closed
	}()

	// Output goes through pipes we own rather than os/exec's copying
	// goroutines, so that Wait returns when the process exits even if a
	// stray child still holds the pipe.
	outR, outW, err := os.Pipe()
	if err != nil {
		in.shutdownServer()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		in.shutdownServer()
		return nil, err
	}
	cmd := exec.Command(r.bootstrap)
	cmd.Dir = filepath.Dir(r.bootstrap)
	cmd.Env = r.processEnv(ln.Addr().String())
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		in.shutdownServer()
		return nil, fmt.Errorf("start %s: %w", r.bootstrap, err)
	}
	in.cmd = cmd
	in.pid = cmd.Process.Pid
	r.procStarted()
	r.bg.Add(3)
	go r.copyLines(outR)
	go r.copyLines(errR)
	go func() {
		defer r.bg.Done()
		err := cmd.Wait()
		// Lambda discards the whole sandbox; do the same for anything the
		// process left behind in its group.
		killGroup(in.pid)
		in.exitErr = err
		in.mu.Lock()
		reason := in.reason
		in.mu.Unlock()
		// Report before waking the worker, so a restart is never reported
		// ahead of the exit that caused it.
		r.procExited()
		r.emitProcess(ProcessEvent{Kind: ProcessExited, Instance: slot, PID: in.pid, Start: start, Reason: reason, ExitErr: err})
		close(in.exited)
		in.shutdownServer()
	}()
	r.emitProcess(ProcessEvent{Kind: ProcessStarted, Instance: slot, PID: in.pid, Start: start})
	return in, nil
}

func (in *instance) shutdownServer() {
	in.closeOnce.Do(func() {
		close(in.closing)
		_ = in.srv.Close()
	})
}

func (in *instance) isExited() bool {
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

// kill ends the process group at once and waits for the process to be
// reaped. Lambda kills a timed-out environment the same way.
func (in *instance) kill(reason string) {
	in.mu.Lock()
	if in.reason == "" {
		in.reason = reason
	}
	in.mu.Unlock()
	killGroup(in.pid)
	<-in.exited
}

// stop ends an idle process: SIGTERM first if it registered an extension
// (that is how aws-lambda-go asks for it), then SIGKILL.
func (in *instance) stop() {
	if in.isExited() {
		return
	}
	if in.extension.Load() {
		in.mu.Lock()
		if in.reason == "" {
			in.reason = "stop"
		}
		in.mu.Unlock()
		termGroup(in.pid)
		t := time.NewTimer(500 * time.Millisecond)
		defer t.Stop()
		select {
		case <-in.exited:
			return
		case <-t.C:
		}
	}
	in.kill("stop")
}

func exitMessage(err error) string {
	if err == nil {
		return "Runtime exited without providing a reason"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "Runtime exited with error: " + ee.String()
	}
	return "Runtime exited with error: " + err.Error()
}

// copyLines forwards a process's output to Output a line at a time, so
// lines of concurrent processes never interleave mid-line.
func (r *Runner) copyLines(f *os.File) {
	defer r.bg.Done()
	defer f.Close()
	br := bufio.NewReaderSize(f, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			r.outMu.Lock()
			_, _ = r.cfg.Output.Write(line)
			r.outMu.Unlock()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				r.outMu.Lock()
				fmt.Fprintf(r.cfg.Output, "localrun: reading function output: %v\n", err)
				r.outMu.Unlock()
			}
			return
		}
	}
}

// processEnv is the environment Lambda defines for a custom runtime, plus
// PATH and the configured Env.
func (r *Runner) processEnv(apiAddr string) []string {
	c := r.cfg
	dir := filepath.Dir(r.bootstrap)
	env := []string{
		"AWS_LAMBDA_RUNTIME_API=" + apiAddr,
		"AWS_LAMBDA_FUNCTION_NAME=" + c.FunctionName,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(c.MemoryMB),
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_INITIALIZATION_TYPE=on-demand",
		"AWS_LAMBDA_MAX_CONCURRENCY=" + strconv.Itoa(c.ProcessConcurrency),
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + c.FunctionName,
		"AWS_LAMBDA_LOG_STREAM_NAME=" + time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + newHex(16),
		"AWS_REGION=" + r.region,
		"AWS_DEFAULT_REGION=" + r.region,
		"_HANDLER=" + c.Handler,
		"LAMBDA_TASK_ROOT=" + dir,
		"LAMBDA_RUNTIME_DIR=" + dir,
		"TZ=:UTC",
		"LANG=en_US.UTF-8",
		"PATH=" + os.Getenv("PATH"),
	}
	return append(env, c.Env...)
}
