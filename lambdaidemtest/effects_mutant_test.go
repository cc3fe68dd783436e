//go:build lambdaidem_mutants

package lambdaidemtest_test

import (
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// With the old at-most-once behaviour back (an error returned while the
// context was live is retried), the kit finds the second email of the
// user's report from the effects alone: no counter of the test's own.
// Run it with go test -tags lambdaidem_mutants ./lambdaidemtest -run Mutant.
func TestKitCatchesTheAtMostOnceRetryMutant(t *testing.T) {
	mutant.Set("amo-error-after-effect-retried")
	defer mutant.Set("")
	k := lambdaidemtest.New(welcome(&emailAPI{}, passOn), byUser, lambdaidem.WithAtMostOnce())
	k.ErrorAfterEffect(signup)
	err := k.Check()
	if err == nil || !strings.Contains(err.Error(), "happened 2 times; at-most-once allows one per key") {
		t.Fatalf("Check = %v, want the second email reported", err)
	}
}
