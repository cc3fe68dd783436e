package sim_test

import (
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
)

// One scenario, drawn from its seed and run to the end.
func ExampleRun() {
	const seed = 42
	res := sim.Run(seed, sim.Draw(seed, nil, ""), nil, false)
	fmt.Println("failed:", res.Failed())
	// Output: failed: false
}
