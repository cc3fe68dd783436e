// Package chaos is the project's fault-injection run (`make chaos`, and a
// small run in `make test`): it proves, against real engines, that
// lambdaidem loses no message and repeats no effect beyond what its mode
// allows, while processes crash, the store fails and consumers overlap.
//
// One Run sends many messages to a fresh SQS queue and lets two local event
// source mappings (package localrun) poll it at once, each running the
// real bootstrap of the chaos function (cmd/lambdaidem-chaos/fn) in two
// processes. Around it Run injects, all chosen from one seed:
//
//   - duplicate sends: the same body and key again, with a new message ID,
//     up to DuplicateSpread sends later;
//   - process crashes at a chosen step of the first attempt: after the
//     claim, after the effect (before completion), during completion;
//   - store faults on the function's DynamoDB requests, through a loopback
//     proxy (internal/faultproxy): throttling, 500s, timeouts before and
//     after the write applied, dropped responses; with Config.Store
//     StoreRedis the idempotency store is the Redis store and the same
//     faults hit its commands through a RESP proxy (a LOADING error for a
//     throttle, an ERR reply for a 500);
//   - slow handlers that outlive the queue's short visibility timeout, so
//     SQS hands their batch out again while it runs;
//   - poison messages.
//
// When the queue has drained, Run reads what the run left behind — the
// effects table (one row per execution of the effect, written by the
// function and never deduplicated; in ModeTx on the Redis store, one hash
// per effect, written by a command of the completion's script), the DLQ
// (through sqsqueue.Parse) and the idempotency records — and checks:
//
//   - lost = 0: every key has an effect or a DLQ entry with a reason;
//   - ModeTx (effect committed with the completion) and ModeOptimistic
//     (the same handler under lambdaidem.WithOptimisticCommit, whose first
//     delivery takes no claim): no duplicate effect, and each effect
//     belongs to the claim that completed its key (an unleased optimistic
//     commit: to the message the record names);
//   - ModePlain (effect written before completion): duplicate effects do
//     not exceed the effects whose completion the logs show was never
//     recorded, key by key, and each duplicate follows a lease takeover
//     (or a failed effect write) in the logs;
//   - every DLQ entry has a reason, and no poison message ran or was
//     claimed more than MaxAttempts times.
//
// The smallest use (the services are DynamoDB Local and an SQS emulator):
//
//	cfg := chaos.DefaultConfig(chaos.ModeTx)
//	cfg.Messages = 500
//	cfg.DynamoDBEndpoint = "http://127.0.0.1:8000"
//	cfg.SQSEndpoint = "http://127.0.0.1:5000"
//	rep, err := chaos.Run(ctx, cfg)
//	chaos.Print(os.Stdout, rep)
//	if err != nil { ... } // errors.Is(err, chaos.ErrInvariant) when one broke
//
// Config.Batched runs ModePlain or ModeTx with lambdaidem.WithBatchedWrites
// (the fresh records of a batch claimed in one store request, the
// successes completed in one more) under the same invariants.
//
// The seed is in the report; Config.Seed replays a run's workload and
// fault plan (the machine decides the interleaving).
//
// A run is a scenario on internal/harness, which the demo and the bench
// share: the harness builds the bootstrap, creates the tables and queues,
// runs the pollers under localrun, draws the workload (harness.Mix), sends
// it through package producer within Backlog, waits for the queue to drain
// and reads back the effects, the DLQ and the records. What is the chaos
// run's own stays here: the fault plan and its proxies (faults.go), the log
// reading that explains each effect and each key's trail (observe.go, hooks
// on the harness's observer), the facts (collect.go) and the report with
// its loss and duplicate accounting (report.go).
package chaos
