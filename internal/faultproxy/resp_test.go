package faultproxy

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

// TestReadRESP: one whole value of every RESP2 and RESP3 type is read,
// bytes and all, and a command's arguments come out of its array.
func TestReadRESP(t *testing.T) {
	cases := []struct {
		name, in string
		args     []string
	}{
		{"command", "*3\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n0\r\n", []string{"EVALSHA", "abc", "0"}},
		{"binary bulk", "*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n", []string{"GET", "a\r\nb"}},
		{"simple", "+OK\r\n", nil},
		{"error", "-NOSCRIPT No matching script\r\n", nil},
		{"null bulk", "$-1\r\n", nil},
		{"nested", "*2\r\n*2\r\n:1\r\n,1.5\r\n%1\r\n+k\r\n~1\r\n_\r\n", nil},
		{"attribute", "|1\r\n+ttl\r\n:3\r\n$1\r\nx\r\n", nil},
		{"verbatim and big number", "*2\r\n=7\r\ntxt:abc\r\n(123\r\n", nil},
	}
	for _, c := range cases {
		// A second value follows: the reader must stop at the first's end.
		r := bufio.NewReader(strings.NewReader(c.in + "+NEXT\r\n"))
		raw, args, err := readRESP(r, true)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(raw) != c.in {
			t.Errorf("%s: read %q, want %q", c.name, raw, c.in)
		}
		if c.args != nil && !slices.Equal(args, c.args) {
			t.Errorf("%s: args %q, want %q", c.name, args, c.args)
		}
		if next, _, err := readRESP(r, false); err != nil || string(next) != "+NEXT\r\n" {
			t.Errorf("%s: the next value read as %q, %v", c.name, next, err)
		}
	}
	if _, _, err := readRESP(bufio.NewReader(strings.NewReader("?what\r\n")), false); err == nil {
		t.Error("an unknown type was accepted")
	}
}
