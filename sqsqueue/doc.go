// Package sqsqueue is the SQS side of lambdaidem: a dead-letter sink
// ([Sink], a lambdaidem.DeadLetterSink), a visibility changer
// ([VisibilityChanger], a lambdaidem.VisibilityChanger), and the
// operator's side of the dead-letter queue: [Redrive], which moves
// dead-lettered messages back to their source queue, [Browse], which
// shows what the queue holds without moving anything, and [Resolve], which
// carries out a person's decision on a copy whose outcome is unknown.
//
// Wiring both into the decorator:
//
//	cfg, _ := config.LoadDefaultConfig(ctx)
//	client := sqs.NewFromConfig(cfg)
//	h := lambdaidem.SQS(store, handle,
//		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(client, os.Getenv("DLQ_URL"))),
//		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(client)),
//	)
//	lambda.Start(h)
//
// The function's role needs sqs:SendMessage and sqs:GetQueueAttributes on the
// DLQ (and kms:GenerateDataKey and kms:Decrypt when the DLQ is encrypted with
// a customer managed key) and sqs:ChangeMessageVisibility and sqs:GetQueueUrl
// on the source queue.
//
// # Queue URLs
//
// ChangeMessageVisibility needs the source queue's URL; a Lambda record
// carries only its ARN (eventSourceARN, arn:PARTITION:sqs:REGION:ACCOUNT:NAME).
// The ARN is validated strictly first ([ParseARN]: a 12-digit account ID,
// Region and partition of lowercase words, a queue name SQS accepts), since
// ARNs can come from outside (a DLQ copy's metadata). Then, first rule that
// applies:
//
//  1. WithQueueURLs: an explicit URL for the ARN;
//  2. WithQueueURLFunc: a function's answer, unless empty;
//  3. when the client has GetQueueUrl (*sqs.Client does): SQS's own answer
//     for the queue name and owner account, asked once per ARN and cached,
//     and refused unless it names that queue (and account, when the URL
//     shows one). This works on emulators whose URLs differ from AWS's.
//     It needs sqs:GetQueueUrl on the queue, and the queue must be in the
//     client's Region;
//  4. for a client without GetQueueUrl, derivation: ENDPOINT/ACCOUNT/NAME,
//     where ENDPOINT is WithEndpoint, else the client's BaseEndpoint, else
//     AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL for a client that hides its
//     options; else https://sqs.REGION.amazonaws.com/ACCOUNT/NAME
//     (amazonaws.com.cn in China).
//
// # Dead-letter message format (version 1)
//
// The DLQ copy carries the original body unchanged, and one message
// attribute of the library's, named "lambdaidem", data type "String", whose
// value is a compact JSON object:
//
//	field             JSON type  meaning
//	v                 number     format version, 1
//	reason            string     max_attempts, poison, key_conflict,
//	                             key_already_dead_lettered, outcome_unknown, ...
//	error             string     last error text, at most WithErrorLimit bytes
//	                             (default 4096), cut at a character boundary;
//	                             omitted when empty
//	error_truncated   bool       true when error was shortened; else omitted
//	attempts          number     attempts counted by the store
//	source_arn        string     the source queue's ARN (eventSourceARN)
//	message_id        string     the source message's ID
//	group_id          string     the source MessageGroupId (FIFO sources);
//	                             omitted otherwise
//	first_attempt_at  string     RFC 3339 UTC with nanoseconds; omitted when unknown
//	last_attempt_at   string     as first_attempt_at
//	namespace         string     the idempotency record's namespace
//	key               string     the idempotency record's key
//	payload_hash      string     the message's payload hash, as the decorator
//	                             stored it on a record; omitted when unknown
//	lease_proof       string     a one-way digest of the lease token the copy
//	                             was sent under (lambdaidem.LeaseProof);
//	                             omitted for a message that held no lease
//	attrs             object     present only when the originals are packed
//
// SQS allows ten message attributes. When the original has at most nine,
// none of them named "lambdaidem", they stay native attributes of the copy,
// next to "lambdaidem". Otherwise all of them move into "attrs", and the copy
// carries "lambdaidem" alone. A packed attribute is
// {"type": DataType, "s": StringValue, "b": BinaryValue as base64}, e.g.
//
//	{"v":1,"reason":"poison",...,"attrs":{"tenant":{"type":"String","s":"acme"},"sig":{"type":"Binary","b":"AP8="}}}
//
// [Parse] (from ReceiveMessage) and [ParseEvent] (from a Lambda record)
// undo this: they return the body, the original attributes and the
// [Metadata]. Unknown JSON fields are ignored, so readers of version 1 accept
// additions; a higher "v" is refused with [ErrNotDeadLetter].
//
// Size: SQS counts the body plus every attribute's name, data type and
// value. Sink keeps the copy within the DLQ's MaximumMessageSize (up to
// 1 MiB), read once with GetQueueAttributes (sqs:GetQueueAttributes on the
// DLQ), or set with WithMaxMessageSize; until it is known, within
// [DefaultMaxMessageSize] (256 KiB, what every queue accepts). If
// the copy does not fit, the error text is shortened, down to nothing; if it
// still does not fit, Send returns [ErrTooLarge] without sending, every time
// it is asked: the caller logs and counts it.
//
// FIFO DLQs (URL ending in ".fifo") get the source MessageGroupId (the
// source message ID when the source is a standard queue) and the
// deduplication ID hex(SHA-256(source message ID, NUL, reason)), so a copy
// sent twice within five minutes is stored once.
//
// # Errors
//
// Failed SQS calls wrap a named error when the kind is known —
// [ErrQueueNotFound], [ErrAccessDenied] (IAM, queue policy or KMS),
// [ErrUnreachable], [ErrTooLarge], [ErrVisibilityLimit], [ErrNotInFlight] —
// together with the SDK's error, so both errors.Is and errors.As work.
//
// # Redrive
//
// [Redrive] receives from the DLQ and, per copy: checks it (a lambdaidem
// copy, from one of RedriveOptions.SourceQueues, not a key conflict, not
// handled already in this run), resets the idempotency record with the
// store's ResetDeadLetter (which applies only when the record is
// DEAD_LETTERED by this very copy), sends the original body and attributes
// back, and deletes the copy, in that order. A COMPLETED record means the
// work is done: the copy is deleted without being sent. Anything else
// leaves the copy in the DLQ with the reason. docs/redrive.md in the
// repository has the table of every record state, and which key modes are
// safe with SQS's own redrive (StartMessageMoveTask).
//
// A copy dead-lettered as outcome_unknown stays unless
// RedriveOptions.IncludeOutcomeUnknown asks for it by name: its attempt
// ended without a recorded outcome, so its effect may have happened
// ([ErrUncertain]). [Resolve] records what a person found, one record at a
// time: applied (the record COMPLETED, the copy deleted), not applied (the
// copy redriven, so the key runs once more) or abandoned (kept; never sent
// back, [ErrAbandoned]).
package sqsqueue
