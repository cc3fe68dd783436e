package localrun

import (
	"bytes"
	"io"
	"sync"
)

// LineWriter is an io.Writer for Config.Output that hands each complete
// line of function output, trimmed, to a callback, and copies everything to
// Forward when set. The runner writes whole lines, but any split works.
type LineWriter struct {
	Line    func(line []byte)
	Forward io.Writer

	mu  sync.Mutex
	buf []byte
}

// Write splits p into lines; it is safe for concurrent use.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Forward != nil {
		_, _ = w.Forward.Write(p)
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.Line(bytes.TrimSpace(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}
