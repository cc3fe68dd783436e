package otelidem

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// AWSTraceHeader is the SQS system attribute that carries the X-Ray trace
// header of the request that sent the message, when the sender was traced
// by X-Ray (or sent it through MessageSystemAttributes).
const AWSTraceHeader = "AWSTraceHeader"

// maxTraceHeader bounds the header ParseAWSTraceHeader reads: X-Ray's own
// fields take under 100 bytes; Lineage and other extensions a few more.
const maxTraceHeader = 1024

// ErrBadTraceHeader is the error of a trace header that cannot be read.
var ErrBadTraceHeader = errors.New("otelidem: malformed X-Ray trace header")

// ParseAWSTraceHeader reads an X-Ray trace header, as SQS delivers it in
// the AWSTraceHeader system attribute:
//
//	Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1
//
// into the span context it names: the trace ID is Root's eight hex digits
// of time followed by its 24 of identifier, the span ID is Parent, and
// Sampled=1 sets the sampled flag (0, ?, or no Sampled field leaves it
// unset). Fields are separated by ';', each key=value with its spaces
// trimmed; keys are matched without regard to case; fields it does not
// know (Lineage, Self) are skipped. Root and Parent are required, each
// once, and must be well formed and not all zeros; otherwise the error
// wraps ErrBadTraceHeader. The span context is marked remote.
func ParseAWSTraceHeader(h string) (trace.SpanContext, error) {
	if len(h) > maxTraceHeader {
		return trace.SpanContext{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBadTraceHeader, len(h), maxTraceHeader)
	}
	var (
		tid             trace.TraceID
		sid             trace.SpanID
		root, parent    bool
		sampled, sawSmp bool
	)
	for field := range strings.SplitSeq(h, ";") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return trace.SpanContext{}, fmt.Errorf("%w: field %q has no '='", ErrBadTraceHeader, field)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case strings.EqualFold(k, "Root"):
			if root {
				return trace.SpanContext{}, fmt.Errorf("%w: Root given twice", ErrBadTraceHeader)
			}
			var err error
			if tid, err = parseRoot(v); err != nil {
				return trace.SpanContext{}, err
			}
			root = true
		case strings.EqualFold(k, "Parent"):
			if parent {
				return trace.SpanContext{}, fmt.Errorf("%w: Parent given twice", ErrBadTraceHeader)
			}
			if len(v) != 2*len(sid) || !isHex(v) {
				return trace.SpanContext{}, fmt.Errorf("%w: Parent %q is not 16 hex digits", ErrBadTraceHeader, v)
			}
			_, _ = hex.Decode(sid[:], []byte(v))
			if !sid.IsValid() {
				return trace.SpanContext{}, fmt.Errorf("%w: Parent is all zeros", ErrBadTraceHeader)
			}
			parent = true
		case strings.EqualFold(k, "Sampled"):
			if sawSmp {
				return trace.SpanContext{}, fmt.Errorf("%w: Sampled given twice", ErrBadTraceHeader)
			}
			switch v {
			case "1":
				sampled = true
			case "0", "?":
			default:
				return trace.SpanContext{}, fmt.Errorf("%w: Sampled %q is not 0, 1 or ?", ErrBadTraceHeader, v)
			}
			sawSmp = true
		}
	}
	switch {
	case !root:
		return trace.SpanContext{}, fmt.Errorf("%w: no Root", ErrBadTraceHeader)
	case !parent:
		return trace.SpanContext{}, fmt.Errorf("%w: no Parent", ErrBadTraceHeader)
	}
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), nil
}

// parseRoot reads X-Ray's Root: "1-" 8 hex digits "-" 24 hex digits.
func parseRoot(v string) (trace.TraceID, error) {
	var tid trace.TraceID
	if len(v) != 2+8+1+24 || v[0] != '1' || v[1] != '-' || v[10] != '-' || !isHex(v[2:10]) || !isHex(v[11:]) {
		return tid, fmt.Errorf("%w: Root %q is not 1-<8 hex digits>-<24 hex digits>", ErrBadTraceHeader, v)
	}
	_, _ = hex.Decode(tid[:4], []byte(v[2:10]))
	_, _ = hex.Decode(tid[4:], []byte(v[11:]))
	if !tid.IsValid() {
		return tid, fmt.Errorf("%w: Root is all zeros", ErrBadTraceHeader)
	}
	return tid, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// FormatAWSTraceHeader writes the X-Ray trace header of a span context:
// Root, Parent and Sampled. It is what a sender sets as the
// AWSTraceHeader system attribute to link its message to its trace
// without W3C trace context; ParseAWSTraceHeader reads it back.
func FormatAWSTraceHeader(sc trace.SpanContext) string {
	t := sc.TraceID().String()
	s := sc.SpanID().String()
	sampled := "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + t[:8] + "-" + t[8:] + ";Parent=" + s + ";Sampled=" + sampled
}
