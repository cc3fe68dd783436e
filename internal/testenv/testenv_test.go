package testenv

import (
	"testing"
	"time"
)

func TestSkipOn(t *testing.T) {
	d := Difference{Emulator: "fauxqs", Name: "example", Behaviour: "does otherwise"}
	for _, tc := range []struct {
		emulator string
		skipped  bool
	}{{"fauxqs", true}, {"moto", false}, {"", false}} {
		t.Run("emulator="+tc.emulator, func(t *testing.T) {
			t.Setenv(SQSEmulatorVar, tc.emulator)
			var skipped bool
			t.Run("inner", func(t *testing.T) {
				// Skip ends the test with runtime.Goexit, which still runs this.
				defer func() { skipped = t.Skipped() }()
				SkipOn(t, d)
			})
			if skipped != tc.skipped {
				t.Errorf("%s=%q: skipped %v, want %v", SQSEmulatorVar, tc.emulator, skipped, tc.skipped)
			}
		})
	}
}

func TestContextEndsBeforeTheBinary(t *testing.T) {
	ctx := Context(t)
	got, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	if d, ok := t.Deadline(); ok && !got.Before(d) {
		t.Errorf("the context ends at %s, not before the test binary's deadline %s", got, d)
	}
	if time.Until(got) <= 0 {
		t.Errorf("the context has already ended")
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}
