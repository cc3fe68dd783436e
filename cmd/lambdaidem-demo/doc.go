// Command lambdaidem-demo is the project's main demo (`make demo`): the
// orders example's real bootstrap binary, run the way Lambda runs it
// (package localrun: an emulated Runtime API fed by an SQS event source
// mapping), as two functions side by side: one in the example's plain
// effect mode (the effect is its own PutItem) under a scripted workload of
// duplicates, redeliveries, a poison message, a flaky handler and a process
// crash before the effect; and one in transactional mode (the effect
// commits with the completion in one TransactWriteItems) under duplicates
// and a process crash after the effect and before the completion. It ends
// with a summary table and exits non-zero when an order was lost, an
// effect happened twice, or the poison order is not in the DLQ with its
// reason.
//
// It needs DynamoDB Local and an SQS emulator, found through the SDK's
// endpoint variables; localstack/stack.sh provides both:
//
//	localstack/stack.sh run -- go run ./cmd/lambdaidem-demo
//
// The demo creates its own uniquely named tables and queues (a queue per
// function with a two-second visibility timeout, so redeliveries happen
// within the run; one idempotency table under two namespaces; one effects
// table per function; one DLQ) and deletes them at the end. What it does,
// in three phases:
//
//  1. Two orders whose handler exits the process on its first attempt,
//     each sent alone to its function, so that the crash takes down no
//     other record: the plain function's before its effect, the
//     transactional function's after it — the effect is prepared, and
//     with transactional completion nothing is written until the
//     completion commits. The runner restarts the process; SQS delivers
//     the message again; the library holds it back until the crashed
//     attempt's lease ends, then a new attempt takes the lease over and
//     writes the effect once. (In plain mode a crash after the effect
//     would repeat it: the gap transactional completion closes.)
//  2. The main wave: plain orders, producer duplicates sent back to back
//     (new message IDs, same order_id), an order whose handler outlives
//     the visibility timeout (SQS delivers it again while it runs; the
//     library reports that delivery in progress), a poison order
//     (dead-lettered at once with reason poison) and an order that fails
//     twice before it succeeds; and duplicates for the transactional
//     function.
//  3. Late producer retries of orders already done: acknowledged without
//     running the handler.
//
// The invariants are checked against what the run left behind, not
// against logs: the effects table (one row per effect, never more than one
// per order), the DLQ read back through sqsqueue.Parse, and the
// idempotency records. No timing is asserted; waits have deadlines only.
//
// The demo is a preset of a scenario on internal/harness, which the chaos
// run and the bench share: the harness builds the bootstrap, creates the
// tables and queues, runs the functions under localrun, sends the phases
// through package producer, waits, and reads back the tables, the DLQ and
// the records. demo.go is the scenario itself (the two functions, the
// workload, the three phases); run.go runs it; narrate.go tells what
// happens as it happens; summary.go judges what the run left behind and
// prints the table; readme.go keeps the README's sample in step with a
// real run.
package main
