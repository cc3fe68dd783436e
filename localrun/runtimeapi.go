package localrun

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Runtime API paths and headers, as documented for custom runtimes.
const (
	headerRequestID   = "Lambda-Runtime-Aws-Request-Id"
	headerDeadline    = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID     = "Lambda-Runtime-Trace-Id"
	headerErrorType   = "Lambda-Runtime-Function-Error-Type"
	trailerErrorBody  = "Lambda-Runtime-Function-Error-Body"

	// maxResponse is Lambda's 6 MB limit on a synchronous response.
	maxResponse = 6 * 1024 * 1024
	// maxPayload is Lambda's 6 MB limit on a synchronous invocation's
	// event.
	maxPayload = 6 * 1024 * 1024
)

// invocation is one event on its way to a process and back.
type invocation struct {
	id      string
	payload []byte
	arn     string
	traceID string
	timeout time.Duration

	picked   chan struct{} // closed when a GET /next took the event
	deadline time.Time     // set before picked is closed
	done     chan invokeResult
}

type invokeResult struct {
	response []byte
	err      *FunctionError
}

// routes is the Runtime API (and the little of the Extensions API that
// aws-lambda-go's WithEnableSIGTERM uses) for one instance.
func (in *instance) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", in.handleNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", in.handleResponse)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", in.handleError)
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", in.handleInitError)
	mux.HandleFunc("POST /2020-01-01/extension/register", in.handleExtensionRegister)
	mux.HandleFunc("GET /2020-01-01/extension/event/next", in.handleExtensionNext)
	return mux
}

func (in *instance) handleNext(w http.ResponseWriter, r *http.Request) {
	// With one invocation per process, asking for the next event completes
	// the current one; one that got no response is an error, as the
	// runtime broke the protocol. With several, other GET /next requests
	// are expected while invocations run.
	var cur *invocation
	in.mu.Lock()
	if in.r.cfg.ProcessConcurrency == 1 {
		for _, inv := range in.current {
			cur = inv
		}
	}
	in.mu.Unlock()
	if cur != nil {
		in.complete(cur.id, invokeResult{err: &FunctionError{
			Type: "Runtime.InvalidResponse", Message: "runtime asked for the next event without responding",
		}})
	}
	select {
	case inv := <-in.next:
		inv.deadline = time.Now().Add(inv.timeout)
		in.mu.Lock()
		in.current[inv.id] = inv
		in.mu.Unlock()
		close(inv.picked)
		h := w.Header()
		h.Set(headerRequestID, inv.id)
		h.Set(headerDeadline, strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set(headerFunctionARN, inv.arn)
		h.Set(headerTraceID, inv.traceID)
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.payload)
	case <-r.Context().Done():
	case <-in.closing:
		http.Error(w, "instance shutting down", http.StatusGone)
	}
}

func (in *instance) handleResponse(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxResponse+1))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	res := invokeResult{response: body}
	switch {
	case len(body) > maxResponse:
		res = invokeResult{err: &FunctionError{Type: "Function.ResponseSizeTooLarge", Message: "response payload exceeds 6291456 bytes"}}
	case r.Trailer.Get(headerErrorType) != "":
		// A response stream that failed midway reports its error in
		// trailers; Lambda then treats the invocation as an error.
		res = invokeResult{err: trailerError(r.Trailer)}
	}
	if !in.complete(r.PathValue("id"), res) {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "unknown or completed request ID")
		return
	}
	if res.err != nil && res.err.Type == "Function.ResponseSizeTooLarge" {
		writeAPIError(w, http.StatusRequestEntityTooLarge, res.err.Type, res.err.Message)
		return
	}
	writeAccepted(w)
}

func (in *instance) handleError(w http.ResponseWriter, r *http.Request) {
	fe := readFunctionError(r)
	if !in.complete(r.PathValue("id"), invokeResult{err: fe}) {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "unknown or completed request ID")
		return
	}
	writeAccepted(w)
}

func (in *instance) handleInitError(w http.ResponseWriter, r *http.Request) {
	fe := readFunctionError(r)
	select {
	case in.initErr <- fe:
	default: // one is enough
	}
	writeAccepted(w)
}

func (in *instance) handleExtensionRegister(w http.ResponseWriter, r *http.Request) {
	in.extension.Store(true)
	w.Header().Set("Lambda-Extension-Identifier", newUUID())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"functionName":    in.r.cfg.FunctionName,
		"functionVersion": "$LATEST",
		"handler":         in.r.cfg.Handler,
	})
}

// handleExtensionNext blocks until the instance shuts down: an internal
// extension registered only to get SIGTERM before SIGKILL never expects an
// event, and the runner signals shutdown with SIGTERM.
func (in *instance) handleExtensionNext(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-in.closing:
		http.Error(w, "instance shutting down", http.StatusGone)
	}
}

// complete delivers the result of the running invocation id, if there is
// one.
func (in *instance) complete(id string, res invokeResult) bool {
	in.mu.Lock()
	cur, ok := in.current[id]
	if !ok {
		in.mu.Unlock()
		return false
	}
	delete(in.current, id)
	in.mu.Unlock()
	cur.done <- res // buffered 1, and only the one who removed it sends
	return true
}

func readFunctionError(r *http.Request) *FunctionError {
	fe := &FunctionError{}
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxResponse))
	if json.Unmarshal(body, fe) != nil || (fe.Type == "" && fe.Message == "") {
		fe.Message = string(body)
	}
	if t := r.Header.Get(headerErrorType); t != "" && fe.Type == "" {
		fe.Type = t
	}
	if fe.Type == "" {
		fe.Type = "Runtime.Unknown"
	}
	return fe
}

func trailerError(t http.Header) *FunctionError {
	fe := &FunctionError{Type: t.Get(headerErrorType)}
	if b, err := base64.StdEncoding.DecodeString(t.Get(trailerErrorBody)); err == nil {
		var body FunctionError
		if json.Unmarshal(b, &body) == nil {
			fe.Message = body.Message
		}
	}
	return fe
}

func writeAccepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`)
}

func writeAPIError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(FunctionError{Type: typ, Message: msg})
}
