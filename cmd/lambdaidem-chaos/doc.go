// Command lambdaidem-chaos runs the fault-injection proof (`make chaos`):
// package chaos in both modes, plain (at-least-once: the effect is written
// before completion) and tx (the effect commits with the completion), and
// prints one table of what was injected and observed, side by side. It
// exits 0 when every invariant held, 1 when one broke and 2 when a run
// could not be carried out.
//
// -mode optimistic runs tx's handler under lambdaidem.WithOptimisticCommit
// (no claim on a first delivery; the commit decides), -mode all runs the
// three; -batched runs plain and tx with lambdaidem.WithBatchedWrites (one
// claim request and one completion request per batch; refused with
// optimistic, which has no claim to batch). tx and optimistic must show
// no duplicate effect, every mode no lost message:
//
//	localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -mode optimistic -messages 1500
//	localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -batched -messages 1500 -store redis
//
// It needs DynamoDB Local and an SQS emulator, found through the SDK's
// endpoint variables; localstack/stack.sh provides both:
//
//	localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -messages 1000
//
// The seed is printed first; -seed N replays a run's workload and fault
// plan. The chaos function is built from ./cmd/lambdaidem-chaos/fn unless
// -bootstrap names a prebuilt one.
package main
