// Package localrun runs an unmodified Lambda `bootstrap` binary the way
// AWS Lambda does, fed from a real SQS queue, for tests, demos and fault
// injection without an AWS account.
//
// It has two halves. A Runtime API emulator gives each function process
// its own endpoint on 127.0.0.1 (/2018-06-01/runtime/invocation/next,
// /response, /error, /init/error) and the environment Lambda defines. A
// process serves one invocation at a time (or ProcessConcurrency at once,
// with AWS_LAMBDA_MAX_CONCURRENCY set, as Lambda Managed Instances run
// several invocations in one process) and is reused warm; it is killed
// with its whole process group when the deadline passes, and replaced
// after it exits or crashes. An SQS event source mapping long-polls the
// queue, gathers batches (BatchSize, BatchingWindow), builds the event as
// Lambda does, runs at most MaxConcurrency invocations at once, and then
// deletes only what the outcome allows: with ReportBatchItemFailures every
// record not listed in batchItemFailures; an invalid response, a function
// error, a crash or a timeout deletes nothing. Records that were not
// deleted are left alone and come back when their visibility timeout ends.
// Stopping is the exception: records the runner received and will not
// finish (held for a batch, or in an invocation Stop killed) are handed
// back with their visibility set to 0, and Stop lets a receive in flight
// come back instead of abandoning it, so a restarted runner sees every
// message at once rather than after the visibility timeout.
//
//	r, err := localrun.New(localrun.Config{
//		Bootstrap:               "build/bootstrap",
//		QueueURL:                queueURL,
//		SQS:                     sqs.NewFromConfig(cfg),
//		ReportBatchItemFailures: true,
//		Env:                     localrun.AWSEnv(),
//		Output:                  os.Stderr,
//	})
//	if err != nil { ... }
//	if err := r.Start(ctx); err != nil { ... }
//	defer r.Stop(context.Background())
//
// The command cmd/lambdaidem-local wraps this package.
package localrun
