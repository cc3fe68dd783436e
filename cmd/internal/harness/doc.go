// Package harness is what the project's drivers of the real bootstrap share:
// the demo (cmd/lambdaidem-demo), the chaos run (package chaos) and the
// bench's end-to-end and cold-start runs (package bench). Each of them
// builds a Lambda bootstrap, creates tables and queues on the local stack,
// runs the bootstrap under the local runner (package localrun), sends a
// workload, waits for the work to drain, reads back what the run left
// behind and prints a summary. Here each of those steps is written once:
//
//   - Stack: the local services' endpoints (localstack/stack.sh exports
//     them), the clients and the variables a function needs to reach them.
//   - Open, Harness.Bootstrap and Build: the build of a function, with a
//     progress line before and after (it is the one step that takes
//     seconds).
//   - Harness.Start: a scenario's functions, each described by a Function
//     (its queue, visibility, redrive, effects table, variables, pollers),
//     created under unique names and run under localrun; Harness.Close
//     deletes everything.
//   - Workload and Message: the messages a scenario sends, declared key by
//     key (Message: copies, late copies, poison, failures, sleep, crash,
//     size, group), or drawn from a seed by a Mix (N messages, duplicate,
//     crash, poison and slow rates).
//   - Harness.Play, Send and Wait: phases of sending (through package
//     producer, the key in its message attribute) and waiting until the
//     queues drained, the keys crashed, or every message was deleted.
//   - Observer: what the runners and the function's JSON log lines report
//     while the run goes (deliveries, in flight, library outcomes per key,
//     crashes, restarts), with hooks for a driver's own narration.
//   - ScanTable, Harness.ReadDLQ, ReadRecords, Tally, CountList and Sample:
//     the ground truth after the run and the primitives of its report.
//
// It is internal: a tool for this repository's programs, free to change
// with them. The smallest scenario, one function on one queue:
//
//	cfg := harness.Config{Stack: harness.StackFromEnv(), Name: "my-run", Log: harness.NewLog(os.Stdout, "")}
//	h, bootstrap, err := harness.Open(ctx, cfg, harness.OrdersPackage, "") // builds examples/orders
//	if err != nil { ... }
//	defer h.Close()
//	err = h.Start(ctx, bootstrap, harness.Function{Name: "orders", KeyField: harness.OrdersKeyField, Effects: true})
//	w := harness.Mix{Messages: 100, KeyFormat: "o-%d"}.Workload()
//	err = h.Play(ctx, w, harness.Phase{Name: "main", Sends: w.Order})
//	err = h.Stop(ctx)
package harness
