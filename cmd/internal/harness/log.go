package harness

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Log writes a run's progress lines, whole lines from any goroutine. Each
// line is stamped with the time since Start ("[ 12.3s] "), unless Start is
// zero (the writer stamps its lines itself), and carries Prefix. A nil
// *Log, or one without Out, writes nothing.
type Log struct {
	Out    io.Writer
	Start  time.Time
	Prefix string

	mu sync.Mutex
}

// NewLog returns a Log to out stamped from now.
func NewLog(out io.Writer, prefix string) *Log {
	return &Log{Out: out, Start: time.Now(), Prefix: prefix}
}

// Printf writes one line, stamped now.
func (l *Log) Printf(format string, args ...any) { l.PrintAt(time.Now(), format, args...) }

// PrintAt writes one line stamped with at: an event that happened
// before the line is printed keeps its own time.
func (l *Log) PrintAt(at time.Time, format string, args ...any) {
	if l == nil || l.Out == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stamp := ""
	if !l.Start.IsZero() {
		stamp = fmt.Sprintf("[%5.1fs] ", at.Sub(l.Start).Seconds())
	}
	fmt.Fprintf(l.Out, "%s%s%s\n", stamp, l.Prefix, fmt.Sprintf(format, args...))
}

// Every calls tick(false) every interval until the returned stop is
// called, and tick(true) once when it is: a progress line, and a last
// flush of whatever the line reports. An interval of 0 or less never
// ticks, and stop calls nothing.
func Every(interval time.Duration, tick func(final bool)) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				tick(true)
				return
			case <-t.C:
				tick(false)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
