package sim

import (
	"fmt"
	"strings"
	"time"
)

// traceKeep is how many lines a trace keeps: the last ones matter.
const traceKeep = 400

// Trace is a bounded log of what happened in a world, for failure reports.
type Trace struct {
	lines []string
	start int
	total int
}

func (t *Trace) add(at time.Duration, line string) {
	s := fmt.Sprintf("%10.3fs %s", at.Seconds(), line)
	t.total++
	if len(t.lines) < traceKeep {
		t.lines = append(t.lines, s)
		return
	}
	t.lines[t.start] = s
	t.start = (t.start + 1) % traceKeep
}

// String returns the kept lines, oldest first.
func (t *Trace) String() string {
	var b strings.Builder
	if t.total > len(t.lines) {
		fmt.Fprintf(&b, "(%d earlier lines dropped)\n", t.total-len(t.lines))
	}
	for i := range t.lines {
		b.WriteString(t.lines[(t.start+i)%len(t.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}
