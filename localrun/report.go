package localrun

import (
	"fmt"
	"time"
)

// Outcome is how an invocation ended, as the event source mapping sees it.
type Outcome string

// Outcomes of an invocation. Every outcome but OutcomeSuccess leaves the
// whole batch on the queue, to come back when its visibility timeout ends.
const (
	// OutcomeSuccess: the function returned a response. Its records were
	// deleted, except those it listed in batchItemFailures.
	OutcomeSuccess Outcome = "success"
	// OutcomeInvalidResponse: the partial batch response could not be
	// honoured (not a JSON object, or an itemIdentifier that is missing,
	// empty, not a string or not a message ID of the batch).
	OutcomeInvalidResponse Outcome = "invalid_response"
	// OutcomeFunctionError: the function reported an error (returned an
	// error or panicked) through the Runtime API.
	OutcomeFunctionError Outcome = "function_error"
	// OutcomeCrash: the process exited while handling the invocation.
	OutcomeCrash Outcome = "crash"
	// OutcomeTimeout: no response by the deadline; the process was killed.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeInitError: a new process failed before asking for the event
	// (it exited, reported an init error, or exceeded InitTimeout).
	OutcomeInitError Outcome = "init_error"
	// OutcomeStopped: Stop's context ended while the invocation ran; the
	// process was killed.
	OutcomeStopped Outcome = "stopped"
)

// FunctionError is an error as Lambda reports it for an invocation.
type FunctionError struct {
	// Type is the errorType: the Go type name of a returned error (as
	// aws-lambda-go reports it), or a Lambda type such as
	// "Runtime.ExitError" or "Sandbox.Timedout".
	Type string `json:"errorType"`
	// Message is the errorMessage.
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("%s: %s", e.Type, e.Message)
}

// Invocation reports one invocation of the function with one batch.
type Invocation struct {
	// Seq numbers invocations in the order a process took up their event,
	// starting at 1. Invocations that never reached a process have the
	// number they would have had when their failure was decided.
	Seq uint64
	// RequestID is the invocation's Lambda-Runtime-Aws-Request-Id.
	RequestID string
	// Instance is the concurrency slot (0..MaxConcurrency-1) that ran it.
	Instance int
	// PID is the process that handled it, 0 if none did.
	PID int
	// MessageIDs are the batch's records, in event order.
	MessageIDs []string
	// ReceiveCounts are the ApproximateReceiveCount of each record.
	ReceiveCounts []int
	// Payload is the event JSON sent to the function.
	Payload []byte
	// Outcome says how the invocation ended.
	Outcome Outcome
	// Response is the function's response payload, on OutcomeSuccess or
	// OutcomeInvalidResponse.
	Response []byte
	// Err is the function error for the other outcomes.
	Err *FunctionError
	// Deleted are the records deleted from the queue.
	Deleted []string
	// Failed are the records left on the queue for redelivery.
	Failed []string
	// DeleteErr is set when deleting records failed; those records are in
	// Failed and will be delivered again.
	DeleteErr error
	// Returned are the records of an OutcomeStopped invocation handed
	// back to the queue at once (visibility 0), so that the next runner
	// receives them without waiting out the visibility timeout. They are
	// in Failed too.
	Returned []string
	// ReturnErr is set when handing records back failed; those come back
	// after their visibility timeout instead.
	ReturnErr error
	// Started and Duration time the invocation, from hand-off to result.
	Started  time.Time
	Duration time.Duration
}

// ProcessEventKind says what happened to a process.
type ProcessEventKind string

// Kinds of ProcessEvent.
const (
	ProcessStarted ProcessEventKind = "started"
	ProcessExited  ProcessEventKind = "exited"
)

// ProcessEvent reports a function process starting or exiting.
type ProcessEvent struct {
	Kind ProcessEventKind
	// Instance is the process slot (0..ceil(MaxConcurrency /
	// ProcessConcurrency)-1); with ProcessConcurrency 1 it is the
	// concurrency slot of the invocations the process runs.
	Instance int
	// PID is the process ID (and its process group ID).
	PID int
	// Start counts the processes started in this slot, from 1: a Start
	// above 1 is a restart.
	Start int
	// Reason, for an exit the runner caused, is "timeout", "init_timeout",
	// "init_error" or "stop"; empty when the process exited on its own.
	Reason string
	// ExitErr is the process's exit status as os/exec reports it, nil for
	// a clean exit.
	ExitErr error
}

// Stats are counters over the runner's life. Every invocation counts under
// exactly one of Successes, PartialFailures, InvalidResponses,
// FunctionErrors, Crashes, Timeouts, InitErrors and Stopped.
type Stats struct {
	Batches          int64 // invocations
	Records          int64 // records handed to the function (with redeliveries)
	Deleted          int64 // records deleted
	Failed           int64 // records left for redelivery
	Successes        int64 // OutcomeSuccess invocations whose response listed no failure
	PartialFailures  int64 // OutcomeSuccess invocations whose response listed failures
	InvalidResponses int64
	FunctionErrors   int64
	Crashes          int64
	Timeouts         int64
	InitErrors       int64
	Stopped          int64
	DeleteErrors     int64 // DeleteMessageBatch calls or entries that failed
	Returned         int64 // records handed back to the queue (visibility 0) on stop
	ReturnErrors     int64 // ChangeMessageVisibilityBatch calls or entries of a hand back that failed
	ReceiveErrors    int64 // ReceiveMessage calls that failed
	ProcessStarts    int64
	ProcessExits     int64
	MaxInFlight      int64 // high-water mark of concurrent invocations
	MaxProcesses     int64 // high-water mark of live processes
}
