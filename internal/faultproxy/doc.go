// Package faultproxy is a loopback HTTP reverse proxy that injects faults
// into the traffic between an AWS SDK client and a local service (DynamoDB
// Local, an SQS emulator), so tests exercise real retries against real
// engines instead of mocks.
//
// Faults are programmed per request, matched by the request's index or a
// predicate (usually on the X-Amz-Target operation): forward and then drop
// the response (the write applied, the client never heard it), answer with
// a throttling error or a 500, or hang until the client times out. The
// proxy counts the requests it receives per X-Amz-Target, which is how
// tests measure requests per operation.
//
// The smallest use:
//
//	p, err := faultproxy.New("http://127.0.0.1:8000")
//	if err != nil { ... }
//	defer p.Close()
//	p.Inject(faultproxy.Fault{Match: faultproxy.Op("UpdateItem"), Action: faultproxy.DropResponse, Times: 1})
//	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.URL()) })
//	// ... the first UpdateItem applies, its response is lost, the SDK retries.
//	n := p.Count("UpdateItem") // 2
//
// A proxy is safe for concurrent use; faults can be added while requests
// flow. It speaks plain HTTP only (no TLS), which is what local services
// offer.
//
// RESP is the same idea for the Redis protocol: it pairs each command with
// its reply, so a fault can run a command and lose exactly its reply.
package faultproxy
