package main

import (
	"strings"
	"testing"
)

func TestDescribeResult(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "none"},
		{`{"ok":true}`, `11 bytes: {"ok":true}`},
		{"!lambdaidem: result not stored: too large", "not stored (too large)"},
	} {
		if got := describeResult([]byte(tc.in)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("describeResult(%q) = %q, want it to start with %q", tc.in, got, tc.want)
		}
	}
}
