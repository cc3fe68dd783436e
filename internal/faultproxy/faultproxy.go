package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Action is what the proxy does with a request a Fault matched.
type Action int

// The actions. Forward is the zero value: a Fault with it only counts.
const (
	// Forward passes the request through unchanged.
	Forward Action = iota
	// DropResponse forwards the request, reads the whole upstream response
	// and then closes the client's connection without answering: the
	// write applied, the client never heard it. The SDK sees a
	// connection error and retries.
	DropResponse
	// Respond answers with the Fault's Status, Header and Body without
	// forwarding. Throttle and ServerError are Respond presets.
	Respond
	// Hang holds the request without forwarding it until the client gives
	// up (its timeout or context) or the proxy closes.
	Hang
	// ForwardThenHang forwards the request and then holds the response
	// until the client gives up: a lost response seen as a timeout.
	ForwardThenHang
)

func (a Action) String() string {
	switch a {
	case Forward:
		return "forward"
	case DropResponse:
		return "drop-response"
	case Respond:
		return "respond"
	case Hang:
		return "hang"
	case ForwardThenHang:
		return "forward-then-hang"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Request is what a Fault's Match sees of a request.
type Request struct {
	// Index counts the requests the proxy received, from 0, faults or not.
	Index int
	// Target is the X-Amz-Target header (e.g. "DynamoDB_20120810.PutItem"),
	// "" when absent.
	Target string
	// Body is the request body; do not modify it.
	Body []byte
}

// Operation is the part of Target after the last ".": "PutItem".
func (r Request) Operation() string { return operation(r.Target) }

func operation(target string) string {
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// Fault is one programmed fault.
type Fault struct {
	// Match selects the requests the fault applies to; nil matches all.
	// Combine Op, At and your own predicates.
	Match func(Request) bool
	// Action is what happens to a matched request.
	Action Action
	// Times is how many matched requests the fault applies to before it
	// is used up; 0 means every matched request.
	Times int
	// Status, Header and Body make the answer of a Respond fault.
	Status int
	Header http.Header
	Body   []byte
}

// Op matches requests whose X-Amz-Target operation is one of ops (the part
// after the last dot, e.g. "UpdateItem", or the whole header).
func Op(ops ...string) func(Request) bool {
	return func(r Request) bool {
		for _, op := range ops {
			if r.Target == op || r.Operation() == op {
				return true
			}
		}
		return false
	}
}

// At matches the request with the given Index.
func At(index int) func(Request) bool {
	return func(r Request) bool { return r.Index == index }
}

// Throttle is a Respond fault answering with DynamoDB's throttling error
// (HTTP 400, ThrottlingException), which the AWS SDKs recognise and retry
// as throttling.
func Throttle(match func(Request) bool, times int) Fault {
	return jsonError(match, times, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
}

// ServerError is a Respond fault answering HTTP 500 InternalServerError.
func ServerError(match func(Request) bool, times int) Fault {
	return jsonError(match, times, http.StatusInternalServerError, "InternalServerError", "Internal server error")
}

// jsonError builds an error answer in the AWS JSON 1.0 protocol that
// DynamoDB (and SQS's JSON protocol) speak: the SDK reads the error code
// from "__type" after the "#".
func jsonError(match func(Request) bool, times, status int, code, msg string) Fault {
	body := fmt.Appendf(nil, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, msg+" (injected by faultproxy)")
	return Fault{
		Match:  match,
		Action: Respond,
		Times:  times,
		Status: status,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:   body,
	}
}

// Proxy is a fault-injecting reverse proxy on loopback. Its zero value is
// not usable; create one with New.
type Proxy struct {
	upstream *url.URL
	client   *http.Client
	srv      *http.Server
	ln       net.Listener
	closing  chan struct{}
	served   chan struct{}

	mu      sync.Mutex
	next    int
	faults  []*fault
	counts  map[string]int
	applied map[Action]int
}

type fault struct {
	Fault
	left int // uses left; -1 for unlimited
}

// New starts a proxy on 127.0.0.1 (a free port) in front of upstream, an
// http:// base URL such as DynamoDB Local's. Close it when done.
func New(upstream string) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not an absolute URL", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		upstream: u,
		// A transport of its own, so closing the proxy closes its
		// upstream connections too.
		client:  &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}},
		ln:      ln,
		closing: make(chan struct{}),
		served:  make(chan struct{}),
		counts:  map[string]int{},
		applied: map[Action]int{},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// URL is the proxy's base URL, to use as the client's endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Inject adds a fault. Faults are tried in the order they were added; the
// first that matches a request and is not used up decides its fate.
func (p *Proxy) Inject(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := f.Times
	if left <= 0 {
		left = -1
	}
	p.faults = append(p.faults, &fault{Fault: f, left: left})
}

// ClearFaults removes every fault; requests pass through again.
func (p *Proxy) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Count returns how many requests with the given operation (or whole
// X-Amz-Target) the proxy received since the last ResetCounts, faulted or
// not.
func (p *Proxy) Count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for target, c := range p.counts {
		if target == op || operation(target) == op {
			n += c
		}
	}
	return n
}

// Counts returns the requests received per X-Amz-Target since the last
// ResetCounts.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		m[k] = v
	}
	return m
}

// Total returns the number of requests received since the last ResetCounts.
func (p *Proxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.counts {
		n += c
	}
	return n
}

// Applied returns how many times an action other than Forward was applied.
func (p *Proxy) Applied(a Action) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied[a]
}

// ResetCounts zeroes the counters. Request indexes keep counting.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = map[string]int{}
	p.applied = map[Action]int{}
}

// Close stops the proxy, releases hanging requests and waits for every
// handler to return.
func (p *Proxy) Close() error {
	select {
	case <-p.closing:
		return nil
	default:
	}
	close(p.closing)
	// Shutdown waits for running handlers; hanging ones return as soon as
	// closing is closed.
	err := p.srv.Shutdown(context.Background())
	<-p.served
	p.client.CloseIdleConnections()
	return err
}

// pick counts the request and returns the fault deciding it, if any.
func (p *Proxy) pick(target string, body []byte) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := Request{Index: p.next, Target: target, Body: body}
	p.next++
	p.counts[target]++
	for _, f := range p.faults {
		if f.left == 0 || (f.Match != nil && !f.Match(req)) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		if f.Action != Forward {
			p.applied[f.Action]++
		}
		return f.Fault, true
	}
	return Fault{}, false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "faultproxy: read request: "+err.Error(), http.StatusBadGateway)
		return
	}
	f, _ := p.pick(r.Header.Get("X-Amz-Target"), body)
	switch f.Action {
	case Respond:
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write(f.Body)
		return
	case Hang:
		p.hang(r.Context())
		return
	}
	resp, err := p.forward(r, body)
	if err != nil {
		http.Error(w, "faultproxy: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	switch f.Action {
	case DropResponse:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
			}
		}
		return
	case ForwardThenHang:
		p.hang(r.Context())
		return
	}
	for k, vs := range resp.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

func (p *Proxy) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-p.closing:
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// hopHeaders are connection-level headers a proxy must not pass on.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends the request upstream and reads the whole answer, so that
// DropResponse can drop it only after the upstream applied it.
func (p *Proxy) forward(r *http.Request, body []byte) (response, error) {
	u := *p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawQuery = r.URL.RawQuery
	// The upstream must finish even if the client gives up: a write that
	// the client abandoned may still apply, as it would on AWS.
	ctx := context.WithoutCancel(r.Context())
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	// Keep the signed Host header as the client sent it.
	out.Host = r.Host
	resp, err := p.client.Do(out)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	h := resp.Header.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.Del("Content-Length")
	return response{status: resp.StatusCode, header: h, body: b}, nil
}
