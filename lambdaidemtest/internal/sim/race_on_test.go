//go:build race

package sim

// raceEnabled: the race detector slows the simulator about eightfold.
const raceEnabled = true
