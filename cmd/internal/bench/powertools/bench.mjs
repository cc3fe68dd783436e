// The Powertools for AWS Lambda (TypeScript) side of lambdaidem's
// DynamoDB Local benchmark. The Go program (cmd/lambdaidem-bench)
// starts this script once, next to its installed node_modules, and drives
// it over stdin/stdout, one JSON object per line, so that Go and Node
// iterations interleave in one run against one DynamoDB Local:
//
//   -> {"op":"first","n":1}        <- {"ms":[1.9]}
//   -> {"op":"duplicate","n":1}    <- {"ms":[1.1]}
//   -> {"op":"batch","n":1}        <- {"ms":[7.2]}
//   -> {"op":"fifo","n":1}         <- {"ms":[15.0]}  one FIFO message group of 10
//   -> {"op":"floor","n":1}        <- {"ms":[1.4]}   two bare requests of Powertools' shape
//   -> {"op":"count","path":"first"}  <- {"ok":true}  once through the counting endpoint
//   -> {"op":"quit"}
//
// An error answers {"error":"..."}. Times are wall-clock milliseconds of
// one invocation (one record, or one 10-record batch), measured here so
// that the pipe to Go is outside them.
//
// Environment: BENCH_TABLE (a table with partition key "id", string, as
// Powertools expects), BENCH_ENDPOINT (DynamoDB Local), BENCH_COUNT_ENDPOINT
// (the same through the counting proxy), AWS_REGION.
//
// With BENCH_STORE=redis the persistence layer is Powertools' cache layer
// (CachePersistenceLayer) on an @redis/client client instead:
// BENCH_REDIS_URL (redis://127.0.0.1:PORT) and BENCH_REDIS_COUNT_URL (the
// same server through the counting proxy); no table.
//
// The function is written the way Powertools documents it for SQS:
// processPartialResponse with a BatchProcessor, and makeIdempotent around the
// record handler with the DynamoDB persistence layer, keyed by messageId.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';

import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { createClient } from '@redis/client';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';

const onRedis = process.env.BENCH_STORE === 'redis';
const table = onRedis ? '' : need('BENCH_TABLE');
const region = process.env.AWS_REGION || 'us-east-1';
const body = JSON.stringify({ order_id: 'o-bench', amount: 42, note: 'x'.repeat(64) });
const queueArn = `arn:aws:sqs:${region}:123456789012:bench`;

function need(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
}

// A client with warm connections: the SDK's Node handler keeps sockets
// alive; the agent is explicit so both sides of the comparison are known to
// reuse connections.
function client(endpoint) {
  return new DynamoDBClient({
    endpoint,
    region,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    requestHandler: { httpAgent: new http.Agent({ keepAlive: true, maxSockets: 50 }) },
    maxAttempts: 3,
  });
}

// A Lambda context, as much of it as Powertools reads: the remaining time
// sets the in-progress expiry, as lambdaidem's lease follows the deadline.
function lambdaContext(timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  return {
    functionName: 'bench',
    awsRequestId: randomUUID(),
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
}

function record(messageId) {
  return {
    messageId,
    receiptHandle: 'rh-' + messageId,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'bench',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

// A connected Redis client, as Powertools' cache layer documents it.
async function redisClient(url) {
  return createClient({ url }).connect();
}

// fifoRecords is a FIFO queue's batch of one message group.
function fifoRecords(ids) {
  const group = 'g-' + randomUUID();
  return ids.map((id, i) => {
    const r = record(id);
    r.eventSourceARN = queueArn + '.fifo';
    r.attributes.MessageGroupId = group;
    r.attributes.MessageDeduplicationId = id;
    r.attributes.SequenceNumber = String(10000000000000000000n + BigInt(i));
    return r;
  });
}

// fn builds one "function": a handler as Powertools documents it, on
// DynamoDB (a DynamoDBClient) or on Redis (a connected @redis/client).
// With fifo, its processor is the FIFO one (records in order, one at a
// time, the rest of the group failed after a failure).
function fn(storeClient, { fifo = false } = {}) {
  const persistenceStore = onRedis
    ? new CachePersistenceLayer({ client: storeClient })
    : new DynamoDBPersistenceLayer({ tableName: table, awsSdkV3Client: storeClient });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'messageId' });
  const state = { fail: false };
  const recordHandler = async (_record) => {
    if (state.fail) {
      throw new Error('bench: handler failure');
    }
  };
  const idempotent = makeIdempotent(recordHandler, { persistenceStore, config });
  const handler = async (event, context) => {
    config.registerLambdaContext(context);
    const processor = fifo ? new SqsFifoPartialProcessorAsync() : new BatchProcessor(EventType.SQS);
    const res = await processPartialResponse(event, idempotent, processor, { context, throwOnFullBatchFailure: false });
    return { res, errors: processor.errors };
  };
  return { handler, state };
}

const timed = fn(onRedis ? await redisClient(need('BENCH_REDIS_URL')) : client(need('BENCH_ENDPOINT')));
const counted = fn(onRedis
  ? await redisClient(process.env.BENCH_REDIS_COUNT_URL || need('BENCH_REDIS_URL'))
  : client(process.env.BENCH_COUNT_ENDPOINT || need('BENCH_ENDPOINT')));
const bare = onRedis ? await redisClient(need('BENCH_REDIS_URL')) : client(need('BENCH_ENDPOINT'));
// The FIFO group is measured on DynamoDB only.
const timedFifo = onRedis ? null : fn(client(need('BENCH_ENDPOINT')), { fifo: true });

// Message IDs completed before, for duplicates; filled on first use.
const done = [];
let dupNext = 0;

async function invoke(f, ids, { expectFailures = 0, records = ids.map(record) } = {}) {
  const { res, errors } = await f.handler({ Records: records }, lambdaContext());
  const failures = res.batchItemFailures.length;
  if (failures !== expectFailures) {
    throw new Error(`${failures} batch item failures, want ${expectFailures}; first error: ${errors[0]?.stack ?? errors[0]}`);
  }
}

function fresh(n) {
  return Array.from({ length: n }, () => randomUUID());
}

async function first() {
  const ids = fresh(1);
  const t0 = performance.now();
  await invoke(timed, ids);
  const ms = performance.now() - t0;
  done.push(ids[0]);
  return ms;
}

async function duplicate() {
  if (done.length === 0) {
    await first();
  }
  const id = done[dupNext++ % done.length];
  const t0 = performance.now();
  await invoke(timed, [id]);
  return performance.now() - t0;
}

async function batch() {
  const ids = fresh(10);
  const t0 = performance.now();
  await invoke(timed, ids);
  return performance.now() - t0;
}

async function fifo() {
  if (!timedFifo) {
    throw new Error('fifo: measured on DynamoDB only');
  }
  const ids = fresh(10);
  const records = fifoRecords(ids);
  const t0 = performance.now();
  await invoke(timedFifo, ids, { records });
  return performance.now() - t0;
}

// floor is the two requests Powertools needs for a first delivery, issued
// bare with the same SDK and shape: the conditional PutItem of the
// in-progress record, then the UpdateItem to COMPLETED.
async function floor() {
  if (onRedis) {
    return redisFloor();
  }
  const id = 'floor#' + randomUUID();
  const now = Date.now();
  const t0 = performance.now();
  await bare.send(new PutItemCommand({
    TableName: table,
    Item: {
      id: { S: id },
      expiration: { N: String(Math.floor(now / 1000) + 3600) },
      status: { S: 'INPROGRESS' },
      in_progress_expiration: { N: String(now + 30000) },
    },
    ExpressionAttributeNames: { '#id': 'id', '#expiry': 'expiration', '#in_progress_expiry': 'in_progress_expiration', '#status': 'status' },
    ExpressionAttributeValues: { ':now': { N: String(now / 1000) }, ':now_in_millis': { N: String(now) }, ':inprogress': { S: 'INPROGRESS' } },
    ConditionExpression: 'attribute_not_exists(#id) OR #expiry < :now OR (#status = :inprogress AND attribute_exists(#in_progress_expiry) AND #in_progress_expiry < :now_in_millis)',
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  }));
  await bare.send(new UpdateItemCommand({
    TableName: table,
    Key: { id: { S: id } },
    UpdateExpression: 'SET #expiry = :expiry, #status = :status',
    ExpressionAttributeNames: { '#expiry': 'expiration', '#status': 'status' },
    ExpressionAttributeValues: { ':expiry': { N: String(Math.floor(now / 1000) + 3600) }, ':status': { S: 'COMPLETED' } },
  }));
  return performance.now() - t0;
}

// redisFloor is the same on Redis: the SET NX of the in-progress record,
// then the SET of the completed one, with Powertools' JSON and expiry.
async function redisFloor() {
  const id = 'floor#' + randomUUID();
  const now = Date.now();
  const expiry = Math.floor(now / 1000) + 3600;
  const t0 = performance.now();
  const set = await bare.set(id, JSON.stringify({ status: 'INPROGRESS', expiration: expiry, in_progress_expiration: now + 30000 }),
    { EX: 3600, NX: true });
  if (set === null) {
    throw new Error('floor: the key exists');
  }
  await bare.set(id, JSON.stringify({ status: 'COMPLETED', expiration: expiry }), { EX: 3600 });
  return performance.now() - t0;
}

// count runs one path once through the counting endpoint; Go reads the
// proxy's counters around it. A duplicate needs a completed key first:
// "prepare-duplicate" makes one, so that Go can reset the counters in
// between.
let prepared = null;

async function count(path) {
  switch (path) {
    case 'first':
      return invoke(counted, fresh(1));
    case 'duplicate':
      if (!prepared) {
        throw new Error('send prepare-duplicate first');
      }
      return invoke(counted, prepared);
    case 'failure':
      counted.state.fail = true;
      try {
        return await invoke(counted, fresh(1), { expectFailures: 1 });
      } finally {
        counted.state.fail = false;
      }
    case 'batch':
      return invoke(counted, fresh(10));
    default:
      throw new Error(`unknown path ${path}`);
  }
}

async function handle(cmd) {
  const n = cmd.n ?? 1;
  const run = async (f) => {
    const ms = [];
    for (let i = 0; i < n; i++) {
      ms.push(await f());
    }
    return { ms };
  };
  switch (cmd.op) {
    case 'first':
      return run(first);
    case 'duplicate':
      return run(duplicate);
    case 'batch':
      return run(batch);
    case 'fifo':
      return run(fifo);
    case 'floor':
      return run(floor);
    case 'prepare-duplicate':
      prepared = fresh(1);
      await invoke(counted, prepared);
      return { ok: true };
    case 'count':
      await count(cmd.path);
      return { ok: true };
    case 'versions':
      return { node: process.version };
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === '') {
    continue;
  }
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: `bad command: ${err.message}` }) + '\n');
    continue;
  }
  if (cmd.op === 'quit') {
    break;
  }
  try {
    process.stdout.write(JSON.stringify(await handle(cmd)) + '\n');
  } catch (err) {
    const name = err instanceof ConditionalCheckFailedException ? 'ConditionalCheckFailedException: ' : '';
    process.stdout.write(JSON.stringify({ error: name + (err?.stack || String(err)) }) + '\n');
  }
}
process.exit(0);
