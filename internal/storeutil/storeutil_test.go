package storeutil

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCeilMillis(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_123)
	if got := CeilMillis(base); got != 1_700_000_000_123 {
		t.Errorf("a whole millisecond: %d", got)
	}
	if got := CeilMillis(base.Add(time.Nanosecond)); got != 1_700_000_000_124 {
		t.Errorf("a nanosecond past: %d, want the next millisecond", got)
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 64); got != "short" {
		t.Errorf("Truncate(short) = %q", got)
	}
	long := strings.Repeat("é", 100) // two bytes each
	got := Truncate(long, 64)
	if len(got) > 64 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…[truncated]") {
		t.Errorf("Truncate cut %q (%d bytes)", got, len(got))
	}
}
