// Package lambdaidemtest lets you prove, in a unit test, that your own SQS
// handler is safe under the failure modes lambdaidem is built for: the same
// message delivered twice, a producer's duplicate with a new message ID, a
// redelivery while the first attempt still runs, a crash after your effect
// and before the completion is recorded, a lease taken over from a paused
// instance, a poison message, a FIFO group stopped by a failure, and a
// redrive from the dead-letter queue.
//
// It needs no AWS account, credentials or local services. A Kit runs your
// undecorated handler, decorated with your options, against a simulated
// queue, Lambda's event source mapping, an in-memory store and a fake clock
// (the same deterministic simulation the library is tested with), so a
// scenario takes microseconds and runs the same way every time. Your
// handler's effects go to your own fakes; your test reads them.
//
//	k := lambdaidemtest.New(handler, lambdaidem.WithKeyJSONField("order"))
//	k.CrashAfterEffect(`{"order":"o-1"}`)
//	if payments.Charges("o-1") != 1 { ... }
//	if err := k.Check(); err != nil { ... }
//
// Check holds the test to what it declares: every dead letter, handler
// failure, refused completion and unfinished key must be declared
// (ExpectDeadLetter, ExpectFailure, ExpectUnfinished), or it is reported.
// Poison declares the dead letter of the message it sends.
//
// It also judges external effects: a fake that calls Effect(ctx, what)
// where its effect takes place (the email sent, the card charged) has
// each effect held to what the decorator's mode allows, with no counter
// of the test's own, and ErrorAfterEffect makes such a fake answer with
// an error after the effect happened (an API's 504), as the explorer
// does at random:
//
//	func (f *fakeMailer) Send(ctx context.Context, to string) error {
//		return lambdaidemtest.Effect(ctx, "email to "+to)
//	}
//
// A transactional handler, whose effects are DynamoDB writes committed
// with its completion (lambdaidem.AddCompletionWrite), runs with
// NewWithStore on memstore.New(memstore.WithCompletionWrites(db)), db an
// in-memory dynamotest.DB your test reads; a real store (DynamoDB Local,
// Redis) can be plugged in the same way.
//
// An Exploration runs your handler through thousands of seeded random
// scenarios and checks your own invariant ("each order charged at most
// once") and the library's ("nothing lost"); a failure prints its seed and
// a trace of what happened. Message, Event, SNSBody, EventBridgeBody and
// HTTPRequest build the events Lambda hands a function, for plain table
// tests.
package lambdaidemtest
