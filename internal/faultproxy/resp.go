package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// RESP is a loopback TCP proxy for the Redis protocol (RESP2 and RESP3):
// it reads one whole command from the client, forwards it, reads the one
// whole reply and passes it back, so a fault can drop exactly the reply of
// the command it matched. Commands are matched on their arguments; the
// proxy counts them by command name (upper case, e.g. "EVALSHA").
//
//	p, err := faultproxy.NewRESP("127.0.0.1:6379")
//	if err != nil { ... }
//	defer p.Close()
//	p.Inject(faultproxy.RESPFault{Match: faultproxy.Command("EVALSHA"), Action: faultproxy.DropResponse, Times: 1})
//	// ... the first script runs, its reply is lost, go-redis re-sends it.
//	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
//
// Commands the server pushes without a request (RESP3 push messages) are
// not supported.
type RESP struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu      sync.Mutex
	next    int
	faults  []*respFault
	counts  map[string]int
	applied map[Action]int
	conns   map[net.Conn]bool
	closed  bool
}

// RESPRequest is what a RESPFault's Match sees of a command.
type RESPRequest struct {
	// Index counts the commands the proxy received, from 0.
	Index int
	// Args are the command's arguments; Args[0] is its name as sent.
	Args []string
}

// RESPFault is a fault programmed into a RESP proxy.
type RESPFault struct {
	// Match picks the commands the fault applies to; nil matches all.
	Match func(RESPRequest) bool
	// Action is what happens to a matched command: Forward (count only);
	// DropResponse (it runs, its reply is discarded and the client's
	// connection closed); Respond (answered with the error reply Error
	// without running); Hang (held unforwarded until the client gives up
	// and closes the connection); ForwardThenHang (it runs, the reply is
	// held until the client gives up).
	Action Action
	// Error is the error reply of Respond, e.g. "TRYAGAIN try later"
	// (default "ERR faultproxy: injected error").
	Error string
	// Times is how many commands the fault applies to; 0 means no limit.
	Times int
}

type respFault struct {
	RESPFault
	left int
}

// Command matches commands by name, case-insensitively.
func Command(names ...string) func(RESPRequest) bool {
	return func(r RESPRequest) bool {
		for _, n := range names {
			if len(r.Args) > 0 && strings.EqualFold(r.Args[0], n) {
				return true
			}
		}
		return false
	}
}

// NewRESP starts a RESP proxy on 127.0.0.1 (a free port) in front of the
// server at upstream (host:port). Close it when done.
func NewRESP(upstream string) (*RESP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &RESP{upstream: upstream, ln: ln, counts: map[string]int{}, applied: map[Action]int{}, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port, to give the client instead of the
// server's.
func (p *RESP) Addr() string { return p.ln.Addr().String() }

// Inject adds a fault; the first matching fault that is not used up
// decides a command's fate.
func (p *RESP) Inject(f RESPFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := f.Times
	if left <= 0 {
		left = -1
	}
	p.faults = append(p.faults, &respFault{RESPFault: f, left: left})
}

// Count is the number of commands named name (upper case) received.
func (p *RESP) Count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[name]
}

// Counts returns the commands received per name (upper case).
func (p *RESP) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// ResetCounts sets every command count to zero.
func (p *RESP) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = map[string]int{}
}

// Applied is how many times faults with action a were applied.
func (p *RESP) Applied(a Action) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied[a]
}

// Close stops the proxy and closes every connection through it.
func (p *RESP) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers a connection to close with the proxy; false when the
// proxy is closing.
func (p *RESP) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *RESP) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// pick counts a command and returns the fault for it (Forward when none).
func (p *RESP) pick(args []string) RESPFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := RESPRequest{Index: p.next, Args: args}
	p.next++
	if len(args) > 0 {
		p.counts[strings.ToUpper(args[0])]++
	}
	for _, f := range p.faults {
		if f.left == 0 || (f.Match != nil && !f.Match(req)) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		p.applied[f.Action]++
		return f.RESPFault
	}
	return RESPFault{}
}

func (p *RESP) serve(client net.Conn) {
	defer client.Close()
	if !p.track(client, true) {
		return
	}
	defer p.track(client, false)
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(up, true) {
		return
	}
	defer p.track(up, false)
	cr, ur := bufio.NewReader(client), bufio.NewReader(up)
	for {
		req, args, err := readRESP(cr, true)
		if err != nil {
			return
		}
		f := p.pick(args)
		switch f.Action {
		case Respond:
			msg := f.Error
			if msg == "" {
				msg = "ERR faultproxy: injected error"
			}
			if _, err := client.Write([]byte("-" + msg + "\r\n")); err != nil {
				return
			}
			continue
		case Hang:
			// Until the client gives up and closes its connection.
			_, _ = io.Copy(io.Discard, cr)
			return
		}
		if _, err := up.Write(req); err != nil {
			return
		}
		reply, _, err := readRESP(ur, false)
		if err != nil {
			return
		}
		switch f.Action {
		case DropResponse:
			// The command ran; its reply is lost with the connection.
			return
		case ForwardThenHang:
			_, _ = io.Copy(io.Discard, cr)
			return
		}
		if _, err := client.Write(reply); err != nil {
			return
		}
	}
}

// readRESP reads one whole RESP value and returns its bytes; with args, the
// strings of a top-level array of bulk strings too (a command).
func readRESP(r *bufio.Reader, args bool) ([]byte, []string, error) {
	var buf []byte
	var out []string
	var read func(depth int) error
	read = func(depth int) error {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		if len(line) < 3 || line[len(line)-2] != '\r' {
			return errors.New("faultproxy: malformed RESP line")
		}
		buf = append(buf, line...)
		head, body := line[0], string(line[1:len(line)-2])
		switch head {
		case '+', '-', ':', '_', '#', ',', '(':
			return nil
		case '$', '!', '=':
			n, err := strconv.Atoi(body)
			if err != nil {
				return fmt.Errorf("faultproxy: bad RESP length %q", body)
			}
			if n < 0 {
				return nil
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(r, data); err != nil {
				return err
			}
			buf = append(buf, data...)
			if args && depth == 1 {
				out = append(out, string(data[:n]))
			}
			return nil
		case '*', '~', '>', '%', '|':
			n, err := strconv.Atoi(body)
			if err != nil {
				return fmt.Errorf("faultproxy: bad RESP length %q", body)
			}
			if head == '%' || head == '|' {
				n *= 2
			}
			for range max(n, 0) {
				if err := read(depth + 1); err != nil {
					return err
				}
			}
			if head == '|' {
				// An attribute precedes the value it describes.
				return read(depth)
			}
			return nil
		}
		return fmt.Errorf("faultproxy: unknown RESP type %q", head)
	}
	if err := read(0); err != nil {
		return nil, nil, err
	}
	return buf, out, nil
}
