// Package emailapi is a fake HTTP email API for the chain example's tests
// and the chaos run: it counts the emails it "sends", per order, and
// answers as the faults it is given say, as a real API can: after sending
// (a 504 that hides a sent email) or instead of sending (a 503).
//
// POST /emails with a JSON body holding order_id sends one email, unless
// the server is Keyed and the Idempotency-Key header names a request it
// answered before: then it answers as it did, sending nothing. It listens
// on loopback only.
//
//	api := emailapi.Start(emailapi.Config{Keyed: true})
//	defer api.Close()
//	// point the notify stage at api.URL()
//	if api.Emails("o-1") > 1 { ... }
package emailapi

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
)

// Fault is what the server does with one request instead of answering 200.
type Fault string

// The faults.
const (
	// None sends the email and answers 200.
	None Fault = ""
	// SentThen504 sends the email and answers 504: the caller cannot tell
	// it was sent.
	SentThen504 Fault = "sent_then_504"
	// NotSent503 sends nothing and answers 503 (Retry-After: 0).
	NotSent503 Fault = "not_sent_503"
)

// Config configures a server.
type Config struct {
	// Keyed makes the server honour Idempotency-Key: one email per key,
	// and a repeat answered as the first request was.
	Keyed bool
	// Fault, when set, picks the fault of a request: the order's ID and
	// how many requests for that order came before it (0 for the first).
	Fault func(orderID string, call int) Fault
}

// Server is a running fake.
type Server struct {
	cfg   Config
	srv   *http.Server
	ln    net.Listener
	mu    sync.Mutex
	calls map[string]int
	sent  map[string]int
	keys  map[string]int // status answered, by Idempotency-Key
}

// Start starts a server on a free loopback port.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ln: ln, calls: map[string]int{}, sent: map[string]int{}, keys: map[string]int{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Emails is how many emails the server sent for an order.
func (s *Server) Emails(orderID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[orderID]
}

// Sent returns the emails sent, per order.
func (s *Server) Sent() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.sent))
	for k, v := range s.sent {
		out[k] = v
	}
	return out
}

// Calls is how many requests the server got, for every order.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrderID string `json:"order_id"`
	}
	if r.Method != http.MethodPost || r.URL.Path != "/emails" || json.NewDecoder(r.Body).Decode(&body) != nil || body.OrderID == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	if s.cfg.Keyed && key != "" {
		if status, ok := s.keys[key]; ok {
			w.WriteHeader(status)
			return
		}
	}
	call := s.calls[body.OrderID]
	s.calls[body.OrderID]++
	fault := None
	if s.cfg.Fault != nil {
		fault = s.cfg.Fault(body.OrderID, call)
	}
	status := http.StatusOK
	switch fault {
	case NotSent503:
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return // nothing sent, and nothing remembered under the key
	case SentThen504:
		status = http.StatusGatewayTimeout
	}
	s.sent[body.OrderID]++
	if s.cfg.Keyed && key != "" {
		// What a retry of this key is answered: the email went out.
		s.keys[key] = http.StatusOK
	}
	w.WriteHeader(status)
}
