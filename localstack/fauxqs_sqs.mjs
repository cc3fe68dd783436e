// fauxqs_sqs.mjs — run fauxqs (an SQS emulator, npm package fauxqs 1.9.2)
// as the local stack's SQS on 127.0.0.1 only.
//
// fauxqs's command line and its startFauxqs() always listen on 0.0.0.0,
// which would expose an unauthenticated queue service to the network.
// This launcher builds the same Fastify app through the package's exported
// buildApp() and listens on 127.0.0.1 itself; if the socket it gets is not
// on loopback it exits instead of serving.
//
//   node fauxqs_sqs.mjs PORT
//
// stack.sh copies this file next to the pinned node_modules in
// .tools/fauxqs (installed from localstack/fauxqs/package-lock.json) and
// runs it there, so `import "fauxqs"` resolves to that install.
//
// LAMBDAIDEM_FAUXQS_LOG=1 turns on fauxqs's own request log (one JSON line
// per request; off by default, it costs the benchmark time).
import { readFileSync } from "node:fs";
import { buildApp } from "fauxqs";

const HOST = "127.0.0.1";
const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
	console.error("usage: node fauxqs_sqs.mjs PORT");
	process.exit(2);
}

// The package exports no package.json; this file sits beside node_modules.
const version = JSON.parse(readFileSync(new URL("node_modules/fauxqs/package.json", import.meta.url), "utf8")).version;

const app = buildApp({ logger: process.env.LAMBDAIDEM_FAUXQS_LOG === "1" });

// Error codes. SQS speaks JSON but stays compatible with its old query
// protocol: an error's x-amzn-query-error header carries the query code,
// and the AWS SDKs report that code (the SDK for Go: for every error it
// has no type for, such as InvalidParameterValue). fauxqs prefixes every
// code with "AWS.SimpleQueueService."; SQS does that only for the errors
// below (the awsQueryError codes of SQS's API model, as the AWS SDK for Go
// carries them), names QueueNameExists QueueAlreadyExists, and sends the
// common errors (InvalidParameterValue, MissingParameter, ...) and the
// model's other errors (ReceiptHandleIsInvalid, OverLimit, ...) without a
// prefix, as moto does. Left alone, a message too large for its queue
// would reach the library as "AWS.SimpleQueueService.InvalidParameterValue",
// a code SQS never sends.
const PREFIX = "AWS.SimpleQueueService.";
const PREFIXED = new Set([
	"BatchEntryIdsNotDistinct",
	"BatchRequestTooLong",
	"EmptyBatchRequest",
	"InvalidBatchEntryId",
	"MessageNotInflight",
	"NonExistentQueue",
	"PurgeQueueInProgress",
	"QueueDeletedRecently",
	"TooManyEntriesInBatchRequest",
	"UnsupportedOperation",
]);
const RENAMED = new Map([["QueueNameExists", "QueueAlreadyExists"]]);

/** sqsQueryError turns fauxqs's x-amzn-query-error value into SQS's. */
export function sqsQueryError(value) {
	const [code, ...rest] = value.split(";");
	if (!code.startsWith(PREFIX)) return value;
	const name = code.slice(PREFIX.length);
	const fixed = PREFIXED.has(name) ? code : (RENAMED.get(name) ?? name);
	return [fixed, ...rest].join(";");
}

app.addHook("onSend", async (_request, reply, payload) => {
	const h = reply.getHeader("x-amzn-query-error");
	if (typeof h === "string") reply.header("x-amzn-query-error", sqsQueryError(h));
	return payload;
});
await app.listen({ host: HOST, port });
const addr = app.server.address();
if (addr === null || typeof addr === "string" || addr.address !== HOST) {
	console.error(`fauxqs_sqs: listening on ${JSON.stringify(addr)}, not ${HOST}; stopping`);
	process.exit(1);
}
console.log(`fauxqs ${version} listening on ${HOST}:${addr.port} (node ${process.version})`);

// stack.sh stops the process group with SIGTERM: close the server (long
// polls are answered) and exit.
for (const sig of ["SIGTERM", "SIGINT"]) {
	process.once(sig, () => {
		app.close().finally(() => process.exit(0));
	});
}
