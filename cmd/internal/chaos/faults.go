package chaos

import (
	"sync/atomic"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
)

// FaultKind names a store fault the proxy injects.
type FaultKind string

// The store faults, in the order the plan assigns them.
const (
	// FaultThrottle answers ThrottlingException without forwarding.
	FaultThrottle FaultKind = "throttle"
	// FaultServerError answers HTTP 500 without forwarding.
	FaultServerError FaultKind = "server_error"
	// FaultTimeout holds the request unforwarded until the client's
	// per-attempt timeout ends it.
	FaultTimeout FaultKind = "timeout"
	// FaultTimeoutAfterWrite forwards the request (the write applies) and
	// then holds the answer until the client times out.
	FaultTimeoutAfterWrite FaultKind = "timeout_after_write"
	// FaultDroppedResponse forwards the request (the write applies) and
	// closes the connection instead of answering.
	FaultDroppedResponse FaultKind = "dropped_response"
)

// FaultKinds lists the store faults.
var FaultKinds = []FaultKind{FaultThrottle, FaultServerError, FaultTimeout, FaultTimeoutAfterWrite, FaultDroppedResponse}

// faultPlan decides, from the seed and a request's index at the proxy,
// whether and how that request fails, and counts what it injected. The
// decision depends only on (seed, index), so the plan is the same on a
// replay; which request gets which index is up to the schedule.
type faultPlan struct {
	seed   uint64
	rate   float64
	counts [5]atomic.Int64
}

func (p *faultPlan) kind(index int) (int, bool) {
	if p.rate <= 0 {
		return 0, false
	}
	u := float64(splitmix(p.seed^uint64(index)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
	if u >= p.rate {
		return 0, false
	}
	return min(int(u/p.rate*float64(len(FaultKinds))), len(FaultKinds)-1), true
}

// install programs the proxy: one fault per kind, each matching exactly
// the requests the plan gives that kind.
func (p *faultPlan) install(proxy *faultproxy.Proxy) {
	for k := range FaultKinds {
		match := func(r faultproxy.Request) bool {
			got, ok := p.kind(r.Index)
			if ok && got == k {
				// The proxy applies the first matching fault, and only
				// this one matches: counting here counts what it applied.
				p.counts[k].Add(1)
				return true
			}
			return false
		}
		var f faultproxy.Fault
		switch FaultKinds[k] {
		case FaultThrottle:
			f = faultproxy.Throttle(match, 0)
		case FaultServerError:
			f = faultproxy.ServerError(match, 0)
		case FaultTimeout:
			f = faultproxy.Fault{Match: match, Action: faultproxy.Hang}
		case FaultTimeoutAfterWrite:
			f = faultproxy.Fault{Match: match, Action: faultproxy.ForwardThenHang}
		case FaultDroppedResponse:
			f = faultproxy.Fault{Match: match, Action: faultproxy.DropResponse}
		}
		proxy.Inject(f)
	}
}

// installRESP programs a RESP proxy in front of the Redis store the same
// way, for the store's own commands (scripts and reads; not the client's
// connection set-up). A throttle is a LOADING error (go-redis retries it),
// a server error an ERR reply (it does not).
func (p *faultPlan) installRESP(proxy *faultproxy.RESP) {
	store := faultproxy.Command("EVALSHA", "EVAL", "HGETALL")
	for k := range FaultKinds {
		match := func(r faultproxy.RESPRequest) bool {
			if !store(r) {
				return false
			}
			got, ok := p.kind(r.Index)
			if ok && got == k {
				p.counts[k].Add(1)
				return true
			}
			return false
		}
		f := faultproxy.RESPFault{Match: match}
		switch FaultKinds[k] {
		case FaultThrottle:
			f.Action, f.Error = faultproxy.Respond, "LOADING faultproxy: injected throttle"
		case FaultServerError:
			f.Action, f.Error = faultproxy.Respond, "ERR faultproxy: injected server error"
		case FaultTimeout:
			f.Action = faultproxy.Hang
		case FaultTimeoutAfterWrite:
			f.Action = faultproxy.ForwardThenHang
		case FaultDroppedResponse:
			f.Action = faultproxy.DropResponse
		}
		proxy.Inject(f)
	}
}

// redisStoreCommands counts the Redis store's requests at the proxy.
func redisStoreCommands(proxy *faultproxy.RESP) int {
	return proxy.Count("EVALSHA") + proxy.Count("EVAL") + proxy.Count("HGETALL")
}

func (p *faultPlan) snapshot() map[FaultKind]int {
	m := make(map[FaultKind]int, len(FaultKinds))
	for k, kind := range FaultKinds {
		m[kind] = int(p.counts[k].Load())
	}
	return m
}

// splitmix is SplitMix64's finalizer: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
