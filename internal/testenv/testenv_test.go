package testenv

import "testing"

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
