package faultproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is what each test needs: an upstream that counts what reaches it,
// the proxy in front of it and a client.
type bundle struct {
	proxy   *faultproxy.Proxy
	reached *atomic.Int64
	client  *http.Client
}

func setup(t *testing.T, clientTimeout time.Duration) *bundle {
	t.Helper()
	reached := &atomic.Int64{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream", "yes")
		_, _ = w.Write(append([]byte("echo:"), b...))
	}))
	t.Cleanup(up.Close)
	p, err := faultproxy.New(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &bundle{proxy: p, reached: reached, client: &http.Client{Transport: tr, Timeout: clientTimeout}}
}

func (b *bundle) send(t *testing.T, op, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.proxy.URL()+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, string(out), err
}

func TestForwardAndCount(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	for _, op := range []string{"PutItem", "PutItem", "GetItem"} {
		resp, body, err := b.send(t, op, "x")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || body != "echo:x" || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
		}
	}
	if got := b.proxy.Count("PutItem"); got != 2 {
		t.Errorf("Count(PutItem) = %d, want 2", got)
	}
	if got := b.proxy.Count("DynamoDB_20120810.GetItem"); got != 1 {
		t.Errorf("Count(full target) = %d, want 1", got)
	}
	if got := b.proxy.Total(); got != 3 {
		t.Errorf("Total = %d, want 3", got)
	}
	b.proxy.ResetCounts()
	if got := b.proxy.Counts(); len(got) != 0 {
		t.Errorf("Counts after reset = %v", got)
	}
}

func TestDropResponseAppliesUpstream(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("PutItem"), Action: faultproxy.DropResponse, Times: 1})
	if _, _, err := b.send(t, "PutItem", "x"); err == nil {
		t.Fatal("dropped response: want a client error")
	}
	if got := b.reached.Load(); got != 1 {
		t.Fatalf("upstream reached %d times, want 1 (forwarded before dropping)", got)
	}
	// Used up: the next one passes.
	if _, body, err := b.send(t, "PutItem", "y"); err != nil || body != "echo:y" {
		t.Fatalf("second request: %q, %v", body, err)
	}
	if got := b.proxy.Applied(faultproxy.DropResponse); got != 1 {
		t.Errorf("Applied(DropResponse) = %d, want 1", got)
	}
}

func TestRespondPresetsDoNotForward(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	b.proxy.Inject(faultproxy.Throttle(faultproxy.At(0), 1))
	b.proxy.Inject(faultproxy.ServerError(faultproxy.At(1), 1))
	resp, body, err := b.send(t, "UpdateItem", "x")
	if err != nil || resp.StatusCode != 400 || !strings.Contains(body, "#ThrottlingException") {
		t.Fatalf("throttle: %v %q %v", resp, body, err)
	}
	resp, body, err = b.send(t, "UpdateItem", "x")
	if err != nil || resp.StatusCode != 500 || !strings.Contains(body, "#InternalServerError") {
		t.Fatalf("500: %v %q %v", resp, body, err)
	}
	if got := b.reached.Load(); got != 0 {
		t.Errorf("upstream reached %d times, want 0", got)
	}
	if got := b.proxy.Count("UpdateItem"); got != 2 {
		t.Errorf("faulted requests are counted too: got %d, want 2", got)
	}
}

func TestHangUntilClientGivesUp(t *testing.T) {
	t.Parallel()
	b := setup(t, 100*time.Millisecond)
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("GetItem"), Action: faultproxy.Hang})
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("PutItem"), Action: faultproxy.ForwardThenHang})
	if _, _, err := b.send(t, "GetItem", "x"); err == nil {
		t.Fatal("hang: want a client timeout")
	}
	if got := b.reached.Load(); got != 0 {
		t.Fatalf("Hang forwarded the request (%d)", got)
	}
	if _, _, err := b.send(t, "PutItem", "x"); err == nil {
		t.Fatal("forward-then-hang: want a client timeout")
	}
	if got := b.reached.Load(); got != 1 {
		t.Fatalf("ForwardThenHang reached upstream %d times, want 1", got)
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	held := make(chan struct{})
	b.proxy.Inject(faultproxy.Fault{Action: faultproxy.Hang, Match: func(faultproxy.Request) bool {
		close(held) // one request only: Times is unlimited but the test sends one
		return true
	}})
	done := make(chan error, 1)
	go func() {
		_, _, err := b.send(t, "GetItem", "x")
		done <- err
	}()
	<-held
	if err := b.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
}

func TestNewRejectsRelativeUpstream(t *testing.T) {
	t.Parallel()
	if _, err := faultproxy.New("localhost:8000"); err == nil {
		t.Fatal("want an error for an upstream without scheme")
	}
}
