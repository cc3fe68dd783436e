package localrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Runner is an SQS event source mapping feeding a function that runs as
// local bootstrap processes behind an emulated Lambda Runtime API.
type Runner struct {
	cfg       Config
	bootstrap string // absolute
	queueARN  string
	region    string
	account   string
	fnARN     string

	startOnce atomic.Bool
	started   atomic.Bool
	cancel    context.CancelFunc // stops polling
	hardStop  chan struct{}      // closed when Stop's context ends
	hardOnce  sync.Once
	// recvCtx carries every ReceiveMessage. Stopping does not cancel it:
	// a receive cancelled on the client's side still runs on the
	// server's, and a message it takes then stays hidden for the queue's
	// visibility timeout with no one to hand it back. Only a hard stop
	// (Stop's context ending) cancels it, through recvCancel.
	recvCtx    context.Context
	recvCancel context.CancelFunc
	workers    sync.WaitGroup
	bg         sync.WaitGroup // servers, output copiers, process reapers

	slotsMu sync.Mutex
	slots   []*instance // current instance per process slot, for Stop
	starts  []int       // processes started per process slot
	// startMu serializes starting a process slot's instance, which pollers
	// share when ProcessConcurrency > 1.
	startMu []sync.Mutex

	outMu sync.Mutex
	seq   atomic.Uint64

	statsMu  sync.Mutex
	stats    Stats
	inFlight int64
	procs    int64
}

// New validates cfg and returns a Runner that is not polling yet.
func New(cfg Config) (*Runner, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(c.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("%w: Bootstrap: %v", ErrInvalidConfig, err)
	}
	procs := (c.MaxConcurrency + c.ProcessConcurrency - 1) / c.ProcessConcurrency
	return &Runner{
		cfg:       c,
		bootstrap: abs,
		hardStop:  make(chan struct{}),
		slots:     make([]*instance, procs),
		starts:    make([]int, procs),
		startMu:   make([]sync.Mutex, procs),
	}, nil
}

// Start reads the queue's ARN (for eventSourceARN) and starts polling with
// MaxConcurrency pollers. ctx bounds only that setup; the runner runs until
// Stop.
func (r *Runner) Start(ctx context.Context) error {
	if !r.startOnce.CompareAndSwap(false, true) {
		return ErrStarted
	}
	out, err := r.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(r.cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		r.startOnce.Store(false)
		return fmt.Errorf("localrun: read queue ARN: %w", err)
	}
	r.queueARN = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	// arn:aws:sqs:REGION:ACCOUNT:NAME
	parts := strings.SplitN(r.queueARN, ":", 6)
	r.region, r.account = r.cfg.Region, "000000000000"
	if len(parts) == 6 {
		if r.region == "" {
			r.region = parts[3]
		}
		r.account = parts[4]
	}
	if r.region == "" {
		r.region = "us-east-1"
	}
	r.fnARN = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", r.region, r.account, r.cfg.FunctionName)

	pollCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.recvCtx, r.recvCancel = context.WithCancel(context.Background())
	r.started.Store(true)
	for i := range r.cfg.MaxConcurrency {
		r.workers.Add(1)
		go r.poller(pollCtx, i)
	}
	return nil
}

// Stop stops polling and waits for the invocations in flight to finish
// and their records to be settled, and for a receive in flight to come
// back (at most PollWait). Every record the runner received and did not
// invoke is handed back to the queue (its visibility set to 0), so a
// runner started next receives it at once instead of after the queue's
// visibility timeout.
//
// If ctx ends first, running invocations are killed and their records
// handed back the same way, and Stop returns ctx's error. A receive still
// waiting then is abandoned: a message the queue hands to it in its last
// moments stays hidden for the visibility timeout.
//
// Either way every function process has exited and every goroutine of the
// runner has ended when Stop returns, and what was handed back is visible
// on the queue.
func (r *Runner) Stop(ctx context.Context) error {
	if !r.started.Load() {
		return ErrNotStarted
	}
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.workers.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		r.hardOnce.Do(func() {
			close(r.hardStop)
			r.recvCancel()
		})
		<-done
	}
	r.recvCancel()
	r.slotsMu.Lock()
	slots := append([]*instance(nil), r.slots...)
	r.slotsMu.Unlock()
	var wg sync.WaitGroup
	for _, in := range slots {
		if in != nil { // each process slot once, however many pollers share it
			wg.Add(1)
			go func() {
				defer wg.Done()
				in.stop()
				in.shutdownServer()
			}()
		}
	}
	wg.Wait()
	r.bg.Wait()
	return err
}

// Stats returns the counters so far.
func (r *Runner) Stats() Stats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	return r.stats
}

// poller is one unit of concurrency: it gathers a batch, invokes the
// function on its own instance, settles the batch, and repeats. Receiving
// only when free means no record waits for a free instance while its
// visibility timeout runs. Once polling is stopped, records it holds and
// has not invoked are handed back to the queue.
func (r *Runner) poller(ctx context.Context, slot int) {
	defer r.workers.Done()
	for ctx.Err() == nil {
		parts := r.fitPayload(r.gather(ctx))
		for i, part := range parts {
			if ctx.Err() != nil {
				r.handBack(slices.Concat(parts[i:]...))
				break
			}
			r.runBatch(slot, part)
		}
	}
}

// gather collects up to BatchSize records: a long poll for the first,
// then further receives until the batch is full or BatchingWindow has
// passed since the first arrived. Once polling is stopped it starts no
// new receive and returns what it holds (the poller hands it back). No
// receive waits longer than PollWait, which so bounds how long Stop
// waits for one.
func (r *Runner) gather(ctx context.Context) []types.Message {
	var batch []types.Message
	index := map[string]int{}
	var windowEnd time.Time
	for len(batch) < r.cfg.BatchSize && ctx.Err() == nil {
		wait := r.cfg.PollWait
		if len(batch) > 0 {
			rem := time.Until(windowEnd)
			if rem <= 0 {
				break
			}
			wait = min(rem, max(r.cfg.PollWait, time.Second))
		}
		out, err := r.cfg.SQS.ReceiveMessage(r.recvCtx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(r.cfg.QueueURL),
			MaxNumberOfMessages:         int32(min(10, r.cfg.BatchSize-len(batch))),
			WaitTimeSeconds:             int32(wait / time.Second),
			AttributeNames:              []types.QueueAttributeName{types.QueueAttributeNameAll},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if r.recvCtx.Err() != nil {
				return batch // a hard stop abandoned the receive
			}
			r.count(func(s *Stats) { s.ReceiveErrors++ })
			r.logf("localrun: receive: %v", err)
			if len(batch) > 0 {
				return batch
			}
			r.backoff(ctx)
			continue
		}
		for _, m := range out.Messages {
			// A record whose visibility ran out during the window can be
			// received twice; keep one record with the newest handle.
			id := aws.ToString(m.MessageId)
			if i, ok := index[id]; ok {
				batch[i] = m
				continue
			}
			index[id] = len(batch)
			batch = append(batch, m)
		}
		if len(batch) == 0 {
			continue
		}
		if windowEnd.IsZero() {
			windowEnd = time.Now().Add(r.cfg.BatchingWindow)
		}
		if r.cfg.BatchingWindow == 0 || ctx.Err() != nil || (wait < time.Second && len(out.Messages) == 0) {
			break
		}
	}
	return batch
}

func (r *Runner) backoff(ctx context.Context) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fitPayload splits batch into consecutive parts whose events fit in
// Lambda's 6 MB invocation payload, as the event source mapping invokes
// with fewer records when a batch of large messages (up to 1 MiB each)
// would not fit. A batch that fits is returned whole.
func (r *Runner) fitPayload(batch []types.Message) [][]types.Message {
	if len(batch) == 0 {
		return nil
	}
	if ev, err := r.buildEvent(batch); err != nil || len(ev) <= maxPayload {
		return [][]types.Message{batch}
	}
	// `{"Records":[` + records joined by commas + `]}`
	const envelope = len(`{"Records":[]}`)
	var parts [][]types.Message
	start, size := 0, envelope
	for i, m := range batch {
		one, err := r.buildEvent([]types.Message{m})
		n := len(one) - envelope + 1 // its record and a comma
		if err != nil {
			n = 0 // cannot happen; runBatch reports it
		}
		if i > start && size+n > maxPayload {
			parts = append(parts, batch[start:i])
			start, size = i, envelope
		}
		size += n
	}
	return append(parts, batch[start:])
}

// runBatch invokes the function with batch on slot's instance and then
// deletes what the outcome allows.
func (r *Runner) runBatch(slot int, batch []types.Message) {
	rep := Invocation{
		RequestID:     newUUID(),
		Instance:      slot,
		MessageIDs:    make([]string, len(batch)),
		ReceiveCounts: make([]int, len(batch)),
		Started:       time.Now(),
	}
	ids := make(map[string]bool, len(batch))
	for i, m := range batch {
		rep.MessageIDs[i] = aws.ToString(m.MessageId)
		rep.ReceiveCounts[i] = receiveCount(m)
		ids[rep.MessageIDs[i]] = true
	}
	payload, err := r.buildEvent(batch)
	if err != nil {
		// Cannot happen with events types; fail the batch rather than lose it.
		rep.Outcome, rep.Err = OutcomeInitError, &FunctionError{Type: "Runtime.InvalidEvent", Message: err.Error()}
	} else {
		rep.Payload = payload
		r.enter()
		rep.Outcome, rep.Response, rep.Err, rep.PID = r.invoke(slot, rep.RequestID, payload, &rep.Seq)
		r.leave()
	}
	rep.Duration = time.Since(rep.Started)

	keep := map[string]bool{}
	switch {
	case rep.Outcome != OutcomeSuccess:
		keep = ids
	case r.cfg.ReportBatchItemFailures:
		failed, ok, why := failedItems(rep.Response, ids)
		if !ok {
			rep.Outcome = OutcomeInvalidResponse
			rep.Err = &FunctionError{Type: "InvalidBatchResponse", Message: why}
			keep = ids
		} else {
			keep = failed
		}
	}
	var del []types.Message
	for _, m := range batch {
		if keep[aws.ToString(m.MessageId)] {
			rep.Failed = append(rep.Failed, aws.ToString(m.MessageId))
		} else {
			del = append(del, m)
		}
	}
	deleted, notDeleted, derr := r.deleteMessages(del)
	rep.Deleted = deleted
	rep.Failed = append(rep.Failed, notDeleted...)
	rep.DeleteErr = derr
	if rep.Outcome == OutcomeStopped {
		// Killed by Stop, not failed by the function: a restarted runner
		// should see these records now, not after the visibility timeout.
		rep.Returned, rep.ReturnErr = r.handBack(batch)
	}

	r.count(func(s *Stats) {
		s.Batches++
		s.Records += int64(len(batch))
		s.Deleted += int64(len(rep.Deleted))
		s.Failed += int64(len(rep.Failed))
		switch rep.Outcome {
		case OutcomeSuccess:
			if len(keep) > 0 {
				s.PartialFailures++
			} else {
				s.Successes++
			}
		case OutcomeInvalidResponse:
			s.InvalidResponses++
		case OutcomeFunctionError:
			s.FunctionErrors++
		case OutcomeCrash:
			s.Crashes++
		case OutcomeTimeout:
			s.Timeouts++
		case OutcomeInitError:
			s.InitErrors++
		case OutcomeStopped:
			s.Stopped++
		}
	})
	if r.cfg.OnInvoke != nil {
		r.cfg.OnInvoke(rep)
	}
}

// deleteMessages deletes msgs in batches of ten. A delete runs to the end
// even while stopping: the function already succeeded, and dropping the
// delete would only cause a redelivery.
func (r *Runner) deleteMessages(msgs []types.Message) (deleted, failed []string, err error) {
	var errs []error
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, derr := r.cfg.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{
			QueueUrl: aws.String(r.cfg.QueueURL),
			Entries:  entries,
		})
		cancel()
		if derr != nil {
			errs = append(errs, derr)
			r.count(func(s *Stats) { s.DeleteErrors++ })
			for _, m := range chunk {
				failed = append(failed, aws.ToString(m.MessageId))
			}
			continue
		}
		bad := map[string]bool{}
		for _, f := range out.Failed {
			bad[aws.ToString(f.Id)] = true
			errs = append(errs, fmt.Errorf("delete entry %s: %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
			r.count(func(s *Stats) { s.DeleteErrors++ })
		}
		for i, m := range chunk {
			if bad[fmt.Sprint(i)] {
				failed = append(failed, aws.ToString(m.MessageId))
			} else {
				deleted = append(deleted, aws.ToString(m.MessageId))
			}
		}
	}
	return deleted, failed, errors.Join(errs...)
}

// handBack makes msgs visible on the queue again at once
// (ChangeMessageVisibilityBatch to 0, ten at a time), for records the
// runner received and will not finish because it is stopping. Like a
// delete it runs to the end whatever stop is under way. It returns the
// message IDs handed back; a record whose change failed comes back after
// its visibility timeout, as it would have anyway.
func (r *Runner) handBack(msgs []types.Message) (returned []string, err error) {
	var errs []error
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     m.ReceiptHandle,
				VisibilityTimeout: 0,
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, cerr := r.cfg.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(r.cfg.QueueURL),
			Entries:  entries,
		})
		cancel()
		if cerr != nil {
			errs = append(errs, cerr)
			r.count(func(s *Stats) { s.ReturnErrors++ })
			continue
		}
		bad := map[string]bool{}
		for _, f := range out.Failed {
			bad[aws.ToString(f.Id)] = true
			errs = append(errs, fmt.Errorf("hand back entry %s: %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
			r.count(func(s *Stats) { s.ReturnErrors++ })
		}
		for i, m := range chunk {
			if !bad[strconv.Itoa(i)] {
				returned = append(returned, aws.ToString(m.MessageId))
			}
		}
	}
	r.count(func(s *Stats) { s.Returned += int64(len(returned)) })
	if err := errors.Join(errs...); err != nil {
		r.logf("localrun: hand back records on stop (they return after their visibility timeout): %v", err)
		return returned, err
	}
	return returned, nil
}

// invoke runs one event on the instance of slot's process slot (slots
// share one when ProcessConcurrency > 1), starting or restarting its
// process as needed, and says how it ended.
func (r *Runner) invoke(slot int, id string, payload []byte, seq *uint64) (Outcome, []byte, *FunctionError, int) {
	inv := &invocation{
		id:      id,
		payload: payload,
		arn:     r.fnARN,
		traceID: newTraceID(time.Now()),
		timeout: r.cfg.FunctionTimeout,
		picked:  make(chan struct{}),
		done:    make(chan invokeResult, 1),
	}
	for {
		in, err := r.instanceFor(slot / r.cfg.ProcessConcurrency)
		if err != nil {
			*seq = r.seq.Add(1)
			return OutcomeInitError, nil, &FunctionError{Type: "Runtime.InvalidEntrypoint", Message: err.Error()}, 0
		}
		in.mu.Lock()
		fresh := !in.served
		in.mu.Unlock()

		var initTimeout <-chan time.Time
		if fresh {
			t := time.NewTimer(r.cfg.InitTimeout)
			initTimeout = t.C
			defer t.Stop()
		}
		select {
		case in.next <- inv:
		case <-in.exited:
			if !fresh {
				// A warm process that died between invocations (for
				// example after reporting a panic) never saw this event:
				// start a new one, as Lambda would.
				continue
			}
			*seq = r.seq.Add(1)
			return OutcomeInitError, nil, &FunctionError{Type: "Runtime.ExitError", Message: exitMessage(in.exitErr)}, in.pid
		case fe := <-in.initErr:
			in.kill("init_error")
			*seq = r.seq.Add(1)
			return OutcomeInitError, nil, fe, in.pid
		case <-initTimeout:
			in.kill("init_timeout")
			*seq = r.seq.Add(1)
			return OutcomeInitError, nil, &FunctionError{Type: "Sandbox.Timedout", Message: fmt.Sprintf("init did not finish within %s", r.cfg.InitTimeout)}, in.pid
		case <-r.hardStop:
			in.kill("stop")
			*seq = r.seq.Add(1)
			return OutcomeStopped, nil, &FunctionError{Type: "Runtime.Stopped", Message: "runner stopped"}, in.pid
		}
		<-inv.picked
		*seq = r.seq.Add(1)
		in.mu.Lock()
		in.served = true
		in.mu.Unlock()
		return r.await(in, inv)
	}
}

// await waits for the result of an invocation a process has taken.
func (r *Runner) await(in *instance, inv *invocation) (Outcome, []byte, *FunctionError, int) {
	timer := time.NewTimer(time.Until(inv.deadline))
	defer timer.Stop()
	result := func(res invokeResult) (Outcome, []byte, *FunctionError, int) {
		if res.err != nil {
			return OutcomeFunctionError, nil, res.err, in.pid
		}
		return OutcomeSuccess, res.response, nil, in.pid
	}
	select {
	case res := <-inv.done:
		return result(res)
	case <-in.exited:
		// A process may report an error and exit at once (a panic in
		// aws-lambda-go does): the report wins.
		select {
		case res := <-inv.done:
			return result(res)
		default:
		}
		return OutcomeCrash, nil, &FunctionError{Type: "Runtime.ExitError", Message: fmt.Sprintf("RequestId: %s Error: %s", inv.id, exitMessage(in.exitErr))}, in.pid
	case <-timer.C:
		select {
		case res := <-inv.done:
			return result(res)
		default:
		}
		in.kill("timeout")
		return OutcomeTimeout, nil, &FunctionError{Type: "Sandbox.Timedout", Message: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", inv.id, r.cfg.FunctionTimeout.Seconds())}, in.pid
	case <-r.hardStop:
		in.kill("stop")
		return OutcomeStopped, nil, &FunctionError{Type: "Runtime.Stopped", Message: "runner stopped"}, in.pid
	}
}

// instanceFor returns process slot p's live instance, starting a process
// if it has none or its process exited.
func (r *Runner) instanceFor(p int) (*instance, error) {
	r.startMu[p].Lock()
	defer r.startMu[p].Unlock()
	r.slotsMu.Lock()
	in := r.slots[p]
	r.slotsMu.Unlock()
	if in != nil && !in.isExited() {
		return in, nil
	}
	r.slotsMu.Lock()
	r.starts[p]++
	start := r.starts[p]
	r.slotsMu.Unlock()
	in, err := r.startInstance(p, start)
	if err != nil {
		return nil, err
	}
	r.slotsMu.Lock()
	r.slots[p] = in
	r.slotsMu.Unlock()
	return in, nil
}

func (r *Runner) count(f func(*Stats)) {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	f(&r.stats)
}

func (r *Runner) enter() {
	r.count(func(s *Stats) {
		r.inFlight++
		s.MaxInFlight = max(s.MaxInFlight, r.inFlight)
	})
}

func (r *Runner) leave() { r.count(func(*Stats) { r.inFlight-- }) }

func (r *Runner) procStarted() {
	r.count(func(s *Stats) {
		r.procs++
		s.ProcessStarts++
		s.MaxProcesses = max(s.MaxProcesses, r.procs)
	})
}

func (r *Runner) procExited() {
	r.count(func(s *Stats) {
		r.procs--
		s.ProcessExits++
	})
}

func (r *Runner) emitProcess(ev ProcessEvent) {
	if r.cfg.OnProcess != nil {
		r.cfg.OnProcess(ev)
	}
}

func (r *Runner) logf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.cfg.Output, format+"\n", args...)
}
