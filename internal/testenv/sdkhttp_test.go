package testenv

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// TestHTTPClientKeepsAnEarlyResponse stages, step by step, what a loaded
// machine does by chance: the server answers before net/http's write loop
// has finished with the request (here it is held until the SDK has the
// response headers), and the response body arrives in two parts, so the
// SDK is still reading it when the write loop goes on. With HTTPClient the
// call succeeds; without it, the write loop closes the connection under
// the response and the call fails, which a retrying client would answer
// by sending the request again.
func TestHTTPClientKeepsAnEarlyResponse(t *testing.T) {
	t.Run("HTTPClient", func(t *testing.T) {
		if err := earlyResponse(t, true); err != nil {
			t.Fatalf("ListQueues through HTTPClient: %v", err)
		}
	})
	t.Run("the SDK alone", func(t *testing.T) {
		err := earlyResponse(t, false)
		if err == nil {
			t.Skip("the SDK kept the response on its own: HTTPClient's wrapper is no longer needed")
		}
		if !strings.Contains(err.Error(), "use of closed network connection") {
			t.Fatalf("ListQueues failed otherwise than by the closed connection: %v", err)
		}
		t.Logf("as expected: %v", err)
	})
}

// earlyResponse runs one ListQueues against a server that answers in two
// parts; fixed says whether the client goes through HTTPClient.
func earlyResponse(t *testing.T, fixed bool) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	var (
		headersIn    = make(chan struct{}) // the SDK has the response headers and has closed the body
		headersOnce  sync.Once
		bodyWritten  = make(chan struct{}) // net/http closed the request body: its write is over
		bodyOnce     sync.Once
		clientClosed = make(chan struct{})
	)
	const first, second = `{"QueueUrls":`, `["http://127.0.0.1/123456789012/q"]}`

	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err == nil {
			_, err = io.Copy(io.Discard, req.Body)
		}
		if err != nil {
			served <- err
			return
		}
		_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: "+
			strconv.Itoa(len(first)+len(second))+"\r\n\r\n"+first)
		if err != nil {
			served <- err
			return
		}
		go func() {
			_, _ = br.ReadByte() // returns when the client closes the connection
			close(clientClosed)
		}()
		// The rest of the body once the client's write is over, or once it
		// gave up on the connection.
		select {
		case <-bodyWritten:
		case <-clientClosed:
		}
		_, err = io.WriteString(c, second)
		served <- err
	}()

	var mu sync.Mutex
	var conns []*holdConn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc := &holdConn{Conn: c, until: headersIn}
		mu.Lock()
		conns = append(conns, hc)
		mu.Unlock()
		return hc, nil
	}}
	defer tr.CloseIdleConnections()
	var hc aws.HTTPClient = &http.Client{Transport: tr}
	if fixed {
		hc = HTTPClient(observeClose{next: hc, once: &bodyOnce, closed: bodyWritten})
	}
	client := sqs.New(sqs.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String("http://" + ln.Addr().String()),
		HTTPClient:       hc,
		RetryMaxAttempts: 1,
		APIOptions: []func(*middleware.Stack) error{func(st *middleware.Stack) error {
			// Innermost in the deserialize step: it resumes right after the
			// HTTP call returned (and the SDK closed the request body),
			// before the response body is read.
			return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("afterSend",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					headersOnce.Do(func() { close(headersIn) })
					return out, md, err
				}), middleware.After)
		}},
	})
	_, callErr := client.ListQueues(t.Context(), &sqs.ListQueuesInput{})
	headersOnce.Do(func() { close(headersIn) }) // a call that failed early
	if err := <-served; err != nil && callErr == nil {
		t.Fatalf("server: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 || !conns[0].wasHeld() {
		t.Fatalf("%d connections; the write loop was not held after the request: the test staged nothing", len(conns))
	}
	return callErr
}

// holdConn holds the write that completes the first request on the
// connection (headers and Content-Length bytes of body) until until is
// closed. The bytes are on the wire when it starts holding: only the
// write loop waits.
type holdConn struct {
	net.Conn
	until   <-chan struct{}
	mu      sync.Mutex
	written bytes.Buffer
	held    bool
}

func (c *holdConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.written.Write(p[:n])
	hold := !c.held && err == nil && c.requestWritten()
	c.held = c.held || hold
	c.mu.Unlock()
	if hold {
		<-c.until
	}
	return n, err
}

func (c *holdConn) wasHeld() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// requestWritten reports whether the bytes written hold a whole request.
func (c *holdConn) requestWritten() bool {
	b := c.written.Bytes()
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return false
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:end+4])))
	if err != nil {
		return false
	}
	return int64(len(b)-end-4) >= req.ContentLength
}

// observeClose closes closed when net/http closes a request body: after
// its write loop has sent it and read it once more for extra bytes.
type observeClose struct {
	next   aws.HTTPClient
	once   *sync.Once
	closed chan struct{}
}

func (o observeClose) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.WithContext(r.Context())
		r.Body = closeSignal{body: r.Body, o: o}
	}
	return o.next.Do(r)
}

type closeSignal struct {
	body io.ReadCloser
	o    observeClose
}

func (b closeSignal) Read(p []byte) (int, error) { return b.body.Read(p) }

func (b closeSignal) Close() error {
	b.o.once.Do(func() { close(b.o.closed) })
	return b.body.Close()
}
