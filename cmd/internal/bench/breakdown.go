package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Where a first delivery's time goes: the bench's Go client records, for
// every HTTP attempt, when the SDK handed the request to the transport,
// when the response's headers arrived, when its body was closed (read and
// unmarshalled), and which connection carried it. A first delivery makes
// two requests, so its wall time splits into five phases:
//
//	before   start of the invocation → the claim's request leaves the SDK
//	claim    the claim's round trip (request written, headers back)
//	between  the claim's headers → the completion's request leaves the SDK
//	         (reading and unmarshalling the claim's answer, then the
//	         decorator's and the store's work, and building the request)
//	complete the completion's round trip
//	after    the completion's headers → the invocation returns
//
// The recording costs both sides the same (the floor runs on the same
// client), and the floor's phases are what the SDK alone costs.

// Phases of a first delivery, in order.
var phaseNames = []string{"before", "claim", "between", "complete", "after"}

// wireEvent is one HTTP attempt as the transport saw it.
type wireEvent struct {
	send, headers, closed time.Time
	reused                bool
	conn                  string
}

// wire records HTTP attempts while armed.
type wire struct {
	mu     sync.Mutex
	armed  bool
	events []wireEvent
}

// arm starts a fresh recording.
func (w *wire) arm() {
	w.mu.Lock()
	w.armed, w.events = true, w.events[:0]
	w.mu.Unlock()
}

// take stops the recording and returns its events.
func (w *wire) take() []wireEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	return append([]wireEvent(nil), w.events...)
}

// option wraps a client's HTTP client with the recorder.
func (w *wire) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.HTTPClient = &wireClient{inner: o.HTTPClient, w: w} }
}

type wireClient struct {
	inner dynamodb.HTTPClient
	w     *wire
}

func (c *wireClient) Do(req *http.Request) (*http.Response, error) {
	c.w.mu.Lock()
	armed := c.w.armed
	c.w.mu.Unlock()
	if !armed {
		return c.inner.Do(req)
	}
	var ev wireEvent
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		ev.reused = i.Reused
		ev.conn = i.Conn.LocalAddr().String()
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	ev.send = time.Now()
	resp, err := c.inner.Do(req)
	ev.headers = time.Now()
	c.w.mu.Lock()
	i := len(c.w.events)
	c.w.events = append(c.w.events, ev)
	c.w.mu.Unlock()
	if err == nil {
		resp.Body = &wireBody{ReadCloser: resp.Body, w: c.w, i: i}
	}
	return resp, err
}

type wireBody struct {
	io.ReadCloser
	w *wire
	i int
}

func (b *wireBody) Close() error {
	err := b.ReadCloser.Close()
	now := time.Now()
	b.w.mu.Lock()
	if b.i < len(b.w.events) {
		b.w.events[b.i].closed = now
	}
	b.w.mu.Unlock()
	return err
}

// Breakdown is one variant's first deliveries split into phases.
type Breakdown struct {
	Phases map[string]*Dist
	// Deliveries counts the samples; Reused those whose both requests
	// went out on a kept-alive connection; SameConn those whose two
	// requests used the same connection.
	Deliveries, Reused, SameConn int
}

// add splits one first delivery that started at t0 and took d.
func (b *Breakdown) add(evs []wireEvent, t0 time.Time, d time.Duration) error {
	if len(evs) != 2 {
		return fmt.Errorf("bench: a first delivery made %d HTTP attempts, want 2", len(evs))
	}
	if b.Phases == nil {
		b.Phases = map[string]*Dist{}
		for _, n := range phaseNames {
			b.Phases[n] = &Dist{}
		}
	}
	c, f := evs[0], evs[1]
	b.Phases["before"].Add(c.send.Sub(t0))
	b.Phases["claim"].Add(c.headers.Sub(c.send))
	b.Phases["between"].Add(f.send.Sub(c.headers))
	b.Phases["complete"].Add(f.headers.Sub(f.send))
	b.Phases["after"].Add(t0.Add(d).Sub(f.headers))
	b.Deliveries++
	if c.reused && f.reused {
		b.Reused++
	}
	if c.conn == f.conn {
		b.SameConn++
	}
	return nil
}

// WriteBreakdown writes the phases of a first delivery, lambdaidem next
// to its floor: p50 of each phase, and the difference.
func (r *DynamoResult) WriteBreakdown(w io.Writer) {
	a, f := r.Breakdown[VariantLambdaidem], r.Breakdown[VariantFloor]
	if a == nil || f == nil || a.Deliveries == 0 || f.Deliveries == 0 {
		return
	}
	fmt.Fprintf(w, "| phase of a first delivery | lambdaidem p50 µs | floor p50 µs | difference µs |\n|---|---:|---:|---:|\n")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, n := range phaseNames {
		x, y := a.Phases[n].P50(), f.Phases[n].P50()
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %+.0f |\n", n, us(x), us(y), us(x)-us(y))
	}
	fmt.Fprintf(w, "| both requests on a kept-alive connection | %d of %d | %d of %d | |\n", a.Reused, a.Deliveries, f.Reused, f.Deliveries)
	fmt.Fprintf(w, "| both requests on the same connection | %d of %d | %d of %d | |\n", a.SameConn, a.Deliveries, f.SameConn, f.Deliveries)
}
