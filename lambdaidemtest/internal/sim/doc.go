// Package sim is a deterministic simulation of lambdaidem's whole protocol.
// It runs the real decorator (lambdaidem.SQS, lambdaidem.Wrap, httpidem)
// inside a simulated world: a clock and timer queue that drive leases,
// deadlines, heartbeats, retention and visibility through the engine's
// seam; a simulated SQS with Lambda's event-source-mapping rules; the
// in-memory (or DynamoDB) store behind a fault layer; crashes and timeouts
// of whole execution environments; operators who redrive, release and
// forget. One task runs at a time and every choice comes from one seeded
// generator, so a failure replays exactly from its seed and shrinks to a
// short trace. After every step where they apply, and at the end, the
// checker holds the world to the library's promises (nothing lost, no two
// live handlers on one key, transactional effects exactly once, no
// acknowledged success without its effect, and more: docs/simulation.md).
//
// The smallest use, one scenario:
//
//	res := sim.Run(seed, sim.Draw(seed, nil, ""), nil, false)
//	if res.Failed() {
//		fmt.Println(res.Violations)
//	}
//
// `make sim` explores for longer, `make sim SEED=n` replays one seed with
// its trace, and `make mutants` measures how fast the simulation finds
// each re-introduced bug.
package sim
