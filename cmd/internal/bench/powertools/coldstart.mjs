// The Powertools for AWS Lambda (TypeScript) counterpart of the orders
// example's bootstrap, for the cold-start and memory lines of lambdaidem's
// benchmark. It does the orders function's job the way Powertools documents
// it: processPartialResponse with a BatchProcessor, and makeIdempotent
// around a record handler that writes the order's effect row, keyed by the
// body's order_id, on the DynamoDB persistence layer.
//
// Like a Lambda runtime, it builds the handler once at start, then loops on
// the Runtime API (AWS_LAMBDA_RUNTIME_API): GET the next event, run the
// handler, POST its response. The Go side measures the time from starting
// this process to its first GET of /next, as it does for the Go bootstrap.
//
// Environment: IDEMPOTENCY_TABLE (partition key "id", Powertools' layout),
// EFFECTS_TABLE (partition key "pk"), AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION.

import http from 'node:http';
import { randomUUID } from 'node:crypto';

import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';

const api = process.env.AWS_LAMBDA_RUNTIME_API;
const effects = process.env.EFFECTS_TABLE;

const dynamo = new DynamoDBClient({
  endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB,
  region: process.env.AWS_REGION || 'us-east-1',
  requestHandler: { httpAgent: new http.Agent({ keepAlive: true, maxSockets: 50 }) },
  maxAttempts: 3,
});
const persistenceStore = new DynamoDBPersistenceLayer({ tableName: process.env.IDEMPOTENCY_TABLE, awsSdkV3Client: dynamo });
const config = new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).order_id' });

const recordHandler = async (record) => {
  const order = JSON.parse(record.body);
  const id = randomUUID();
  await dynamo.send(new PutItemCommand({
    TableName: effects,
    Item: {
      pk: { S: `${order.order_id}#${id}` },
      order_id: { S: order.order_id },
      effect_id: { S: id },
      message_id: { S: record.messageId },
      at: { S: new Date().toISOString() },
    },
  }));
};
const idempotent = makeIdempotent(recordHandler, { persistenceStore, config });

const handler = async (event, context) => {
  config.registerLambdaContext(context);
  const processor = new BatchProcessor(EventType.SQS);
  return processPartialResponse(event, idempotent, processor, { context });
};

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const [host, port] = api.split(':');
    const req = http.request({ host, port, path, method, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) {
      req.setHeader('content-type', 'application/json');
      req.end(body);
    } else {
      req.end();
    }
  });
}

for (;;) {
  const next = await call('GET', '/2018-06-01/runtime/invocation/next');
  const requestId = next.headers['lambda-runtime-aws-request-id'];
  const deadline = Number(next.headers['lambda-runtime-deadline-ms']);
  const context = {
    functionName: 'orders-powertools',
    awsRequestId: requestId,
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
  try {
    const out = await handler(JSON.parse(next.body), context);
    await call('POST', `/2018-06-01/runtime/invocation/${requestId}/response`, JSON.stringify(out));
  } catch (err) {
    await call('POST', `/2018-06-01/runtime/invocation/${requestId}/error`,
      JSON.stringify({ errorType: err?.name || 'Error', errorMessage: String(err?.message || err) }));
  }
}
