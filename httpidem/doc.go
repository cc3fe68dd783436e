// Package httpidem makes API Gateway handlers honour the Idempotency-Key
// request header, so a client that retries a POST (a payment, an order)
// after a timeout gets the first attempt's response instead of a second
// effect. It follows the IETF HTTPAPI working group's Internet-Draft "The
// Idempotency-Key HTTP Header Field" (draft-ietf-httpapi-idempotency-key-header,
// revision 07 of October 2025, J. Jena and S. Dalal,
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/),
// and is built on [lambdaidem.Wrap]: any [lambdaidem.Store] keeps the keys
// and the stored responses.
//
// The smallest use, for an HTTP API (payload 2.0); [REST] does the same for
// REST APIs (payload 1.0):
//
//	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), "idempotency")
//	lambda.Start(httpidem.HTTP(store, createPayment,
//		httpidem.WithWrapOptions(lambdaidem.WithNamespace("payments"))))
//
// # Answers
//
//	case                                        status  body and headers
//	first request with a key                    the handler's response, stored
//	repeat after it completed                   the stored response (status, headers,
//	                                            cookies, body, isBase64Encoded) plus
//	                                            Idempotent-Replayed: true
//	repeat while the first still runs           409 Conflict, Retry-After: seconds until
//	                                            the first request's lease ends
//	the same, with WithWaitForCompletion        waits for the first request (see below);
//	                                            then what a repeat after it gets, or
//	                                            409 as above when the wait ends first
//	the request it waited for failed            503, Retry-After (code idempotency-
//	                                            original-failed); nothing stored, a
//	                                            retry with the key runs again
//	same key, different method/path/body        422 Unprocessable Content
//	key missing, route requires one (default)   400 Bad Request
//	key missing, WithKeyOptional                the handler runs, nothing is stored
//	key empty, too long, repeated, malformed    400 Bad Request
//	repeat after the stored response expired    422 (code idempotency-key-expired; see
//	but the key is remembered (late replay)     lambdaidem.WithResultRetention); not re-run
//	outcome unknown: the handler returned       424 Failed Dependency (code idempotency-
//	lambdaidem.OutcomeUnknown, or, at-most-     key-outcome-unknown), to this request
//	once mode, an error not declared            and every later one with the key; never
//	NotApplied, or its lease ran out            re-run (see below)
//	store unavailable, or too little time       503 Service Unavailable, Retry-After
//	left to start                               (WithUnavailableRetryAfter, default 1s)
//	handler returned any other error            the error, unchanged; nothing stored
//	handler answered 5xx                        that response; not stored (at-most-
//	                                            once mode: the key is set aside, 424
//	                                            to repeats)
//	handler answered, but its completion        503, Retry-After (code
//	writes could not be confirmed (store        idempotency-not-committed); never the
//	unavailable, transaction conflict or        handler's answer. A retry with the key
//	throttling, lease lost)                     replays it if they committed, else runs
//	handler answered, but a condition of its    409 (WithWriteRefusedStatus; code
//	own completion write failed                 idempotency-write-refused); nothing
//	                                            written, the key may be retried
//	handler answered, but the store cannot      500 (code idempotency-not-committed)
//	commit its writes at all
//	repeat of a request whose response could    422 (code idempotency-response-not-
//	not be stored (see below)                   stored); not re-run
//	keyed request with no caller identity,      500 (code idempotency-caller-unknown);
//	without WithAnonymousCallers                the handler does not run
//
// The 400, 409 and 422 answers are the draft's ("Error Scenarios"). Every
// answer of this package's own has an RFC 9457 application/problem+json
// body with "type" (WithProblemType, default about:blank), "title",
// "status", "detail" and a "code" extension member that names the case for
// clients: idempotency-key-missing, idempotency-key-invalid,
// idempotency-key-in-use, idempotency-key-reused, idempotency-key-expired,
// idempotency-key-outcome-unknown, idempotency-unavailable,
// idempotency-not-committed, idempotency-write-refused,
// idempotency-response-not-stored, idempotency-caller-unknown,
// idempotency-original-failed.
//
// # Outcome unknown
//
// A handler whose downstream call went out and came back without an
// answer (a timeout, a 504) cannot tell whether its effect happened. It
// says so by returning lambdaidem.OutcomeUnknown(err); with
// lambdaidem.WithAtMostOnce (passed through WithWrapOptions) every error
// says so unless it wraps lambdaidem.NotApplied or lambdaidem.RetryAfter,
// and so does a run whose lease ran out. The key is then set aside: the
// handler never runs again for it, and the request, and every later one
// with the key, is answered 424 Failed Dependency with code
// idempotency-key-outcome-unknown. Neither a replay nor a run: the client
// must find out from the resource itself (the payment, the order) whether
// the request took effect before it sends it again with a new key. 424
// because retrying with the key can never change the answer, which a 4xx
// tells clients that retry 5xx on their own, and because neither API
// Gateway nor anything else here sends it (StatusOutcomeUnknown). In
// at-most-once mode a 5xx answer is a failure like an error, neither
// being stored: it may have come after the effect, so the request gets the
// handler's answer and the key is set aside all the same; a handler whose
// request failed before any effect returns lambdaidem.NotApplied(err)
// instead, and a retry with the key runs again. (Should
// the store be out of reach when the key is set aside, lambdaidem.Wrap
// says what a repeat does.) Pass lambdaidem.EffectKey(ctx) downstream as
// that system's idempotency key: it then recognises the request if it
// ever comes again, and whoever reconciles can look it up by that key.
//
// # What is stored, and what is not
//
// The draft says a retry gets "the result of the previously completed
// operation, success or an error". This package stores every response
// below 500, including 4xx answers, which are the outcome of the request
// as sent. It does not store handler errors or 5xx responses: those say
// the server failed, not that the operation completed, and the point of
// the key is that the client may retry; the next request with the key runs
// the handler again. A handler that answers 5xx after an effect it cannot
// undo should answer 2xx (or 4xx) instead, or its retry repeats the effect.
//
// Once the handler has answered, that answer is returned even if storing
// it failed, because the effect has happened and the client should learn
// of it. If the store could not be reached, a repeat after the first
// request's lease runs out runs the handler again, as lambdaidem.Wrap
// documents. If the response cannot be stored at all (it exceeds
// lambdaidem.WithMaxResultBytes or the store's limit), the key is still
// completed: a repeat gets 422 (idempotency-response-not-stored) and the
// handler does not run again.
//
// The exception is a handler that commits its effect with the key through
// lambdaidem.AddCompletionWrite (with the DynamoDB store, a write in the
// same transaction as the completion). There the effect is those writes,
// and the handler's answer is sent only if they committed. Otherwise the
// client gets a problem response: 503 when it is not known whether they
// committed or the transaction was cancelled for a passing reason (a
// conflict, throttling, a lost lease), 409 (or WithWriteRefusedStatus)
// when a condition of the handler's own write failed, 500 when the store
// cannot commit them. In every such case nothing that was not written is
// reported as done.
//
// # Keys, routes and callers
//
// The key is the header's value: an RFC 8941 string ("…", as the draft
// specifies) or a bare value of visible ASCII, at most
// WithMaxKeyLength bytes (default 255). Keys are namespaced per route
// (the method and API Gateway's resource or route key, so "POST
// /payments" and "POST /refunds" never share a key) and per caller, so
// one caller can neither replay nor block another's response. The caller
// is the authorizer's identity ([RESTCaller], [HTTPCaller]): a Lambda
// authorizer's principalId, a JWT or Cognito user pool "sub" claim, the
// IAM caller's ARN, a Cognito identity, or (REST) the API key's ID. Set
// your own with WithCaller (a tenant header your authorizer checked, a
// client certificate's subject).
//
// A keyed request with none of them has no caller to keep its keys apart
// from everyone else's. By default it is refused with 500 (code
// idempotency-caller-unknown) and the handler does not run: this is how
// an API that was meant to have an authorizer finds out it has none. A
// public route without an authorizer must say so with
// WithAnonymousCallers: its callers then share one key space per route, so
// anyone who learns or guesses a key can replay that response or block the
// request; keys must be unguessable (the draft recommends UUIDs).
//
// The payload fingerprint covers the method, the path as requested and
// the body (with its base64 flag), not the query string or other headers.
// The same key with a different fingerprint is a conflict (422), never a
// replay of another request's response.
//
// # Waiting for the first request
//
// A client that retries while its first request still runs (it timed out
// waiting, or the user pressed twice) gets 409 by default and must retry
// again later. With lambdaidem.WithWaitForCompletion, passed through
// WithWrapOptions, the second request waits instead, up to the bound it
// sets, and answers with the first request's outcome: its stored response
// (marked Idempotent-Replayed), or the problem answer a repeat would get.
// When the first request failed (a handler error or a 5xx answer, neither
// stored) the waiter gets 503 with code idempotency-original-failed, and a
// retry runs the handler again. When the first request's lease runs out
// with no outcome, the waiter runs the handler itself, as a repeat after
// the lease would. The wait ends at the bound, with the request's context
// and before the invocation's deadline margin; API Gateway gives up on an
// integration after 29 seconds by default, so keep the bound and the
// function's timeout under it:
//
//	lambda.Start(httpidem.HTTP(store, createPayment,
//		httpidem.WithWrapOptions(lambdaidem.WithNamespace("payments"),
//			lambdaidem.WithWaitForCompletion(10*time.Second))))
//
// Each wait reads the key's record on a backoff (lambdaidem.WaitPollStart
// doubling up to lambdaidem.WaitPollCap), one consistent read per poll.
//
// # Expiry
//
// The draft asks servers to publish how long keys live: that is
// lambdaidem.WithRetention (default 24 hours) for keys and
// lambdaidem.WithResultRetention for stored responses, set through
// WithWrapOptions.
package httpidem
