package sim

import (
	"context"
	"sync"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// ObserverCheck is a lambdaidem.Observer that holds the decorator to the
// Observer contract while a world runs: every record of an invocation gets
// exactly one RecordStart and one RecordEnd, between the invocation's
// start and its end, with the report the invocation's report then holds;
// RecordEnd receives the context RecordStart returned; the handler runs
// under a context that descends from its record's RecordStart; nothing is
// called after InvocationEnd; and each Wrap call is exactly one record
// whose report says what the call returned. An invocation killed midway
// (a crash, a timeout) owes nothing more.
//
// Violate is told each broken rule. The simulator and the test kit
// install one on every decorator they build.
type ObserverCheck struct {
	Violate func(format string, args ...any)

	mu  sync.Mutex
	seq int
}

type (
	obsInvocationKey struct{}
	obsRecordKey     struct{}
	obsCallKey       struct{}
)

// obsInvocation is one SQS invocation as the observer saw it.
type obsInvocation struct {
	id      int
	size    int
	ended   bool
	records map[int]*obsRecord
}

// obsRecord is one record as the observer saw it.
type obsRecord struct {
	inv   *obsInvocation // nil for a Wrap call
	info  lambdaidem.RecordInfo
	ended bool
	rep   lambdaidem.RecordReport
}

// ObservedCall is one Wrap call a client makes, to be held to what the
// observer saw of it (see ObserverCheck.Call).
type ObservedCall struct {
	starts, ends int
	rep          lambdaidem.RecordReport
}

// InvocationStart implements lambdaidem.Observer.
func (o *ObserverCheck) InvocationStart(ctx context.Context, info lambdaidem.InvocationInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := ctx.Value(obsInvocationKey{}).(*obsInvocation); ok {
		o.Violate("observer: invocation started inside invocation %d's context", prev.id)
	}
	o.seq++
	inv := &obsInvocation{id: o.seq, size: len(info.Records), records: map[int]*obsRecord{}}
	return context.WithValue(ctx, obsInvocationKey{}, inv)
}

// RecordStart implements lambdaidem.Observer.
func (o *ObserverCheck) RecordStart(ctx context.Context, info lambdaidem.RecordInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := &obsRecord{info: info}
	if prev, ok := ctx.Value(obsRecordKey{}).(*obsRecord); ok {
		o.Violate("observer: record %s started inside the context of record %s", name(info), name(prev.info))
	}
	inv, _ := ctx.Value(obsInvocationKey{}).(*obsInvocation)
	switch {
	case info.Entry == lambdaidem.EntrySQS && inv == nil:
		o.Violate("observer: SQS record %s started outside an invocation's context", name(info))
	case info.Entry == lambdaidem.EntrySQS && inv.ended:
		o.Violate("observer: record %s started after its invocation %d ended", name(info), inv.id)
	case info.Entry == lambdaidem.EntrySQS && inv.records[info.Index] != nil:
		o.Violate("observer: record %d of invocation %d (%s) started twice", info.Index, inv.id, name(info))
	case info.Entry == lambdaidem.EntrySQS && (info.Message == nil || info.Index < 0 || info.Index >= inv.size):
		o.Violate("observer: record %s of invocation %d has no message or an index (%d) outside its batch of %d", name(info), inv.id, info.Index, inv.size)
	case info.Entry == lambdaidem.EntrySQS:
		rec.inv = inv
		inv.records[info.Index] = rec
	case inv != nil:
		o.Violate("observer: %s record %s started inside an SQS invocation's context", info.Entry, name(info))
	}
	if info.Entry != lambdaidem.EntrySQS {
		if call, ok := ctx.Value(obsCallKey{}).(*ObservedCall); ok {
			call.starts++
		}
	}
	if (info.Key == "") == (info.KeyErr == nil) {
		o.Violate("observer: record %s has key %q and key error %v: exactly one must be set", name(info), info.Key, info.KeyErr)
	}
	return context.WithValue(ctx, obsRecordKey{}, rec)
}

// RecordEnd implements lambdaidem.Observer.
func (o *ObserverCheck) RecordEnd(ctx context.Context, rep *lambdaidem.RecordReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec, ok := ctx.Value(obsRecordKey{}).(*obsRecord)
	switch {
	case !ok:
		o.Violate("observer: RecordEnd of %s/%s without the context its RecordStart returned", rep.MessageID, rep.Key)
		return
	case rec.ended:
		o.Violate("observer: record %s ended twice", name(rec.info))
		return
	case rec.inv != nil && rec.inv.ended:
		o.Violate("observer: record %s ended after its invocation %d ended", name(rec.info), rec.inv.id)
	}
	rec.ended, rec.rep = true, *rep
	if m := rec.info.Message; m != nil && rep.MessageID != m.MessageId {
		o.Violate("observer: record %s ended with the report of message %s", m.MessageId, rep.MessageID)
	}
	if rep.Key != rec.info.Key {
		o.Violate("observer: record %s started with key %q and ended with key %q", name(rec.info), rec.info.Key, rep.Key)
	}
	if rep.Outcome == "" {
		o.Violate("observer: record %s ended without an outcome", name(rec.info))
	}
	if rec.info.Entry != lambdaidem.EntrySQS {
		if call, ok := ctx.Value(obsCallKey{}).(*ObservedCall); ok {
			call.ends++
			call.rep = *rep
		}
	}
}

// InvocationEnd implements lambdaidem.Observer.
func (o *ObserverCheck) InvocationEnd(ctx context.Context, rep *lambdaidem.InvocationReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	inv, ok := ctx.Value(obsInvocationKey{}).(*obsInvocation)
	switch {
	case !ok:
		o.Violate("observer: InvocationEnd without the context its InvocationStart returned")
		return
	case inv.ended:
		o.Violate("observer: invocation %d ended twice", inv.id)
		return
	}
	if _, inRecord := ctx.Value(obsRecordKey{}).(*obsRecord); inRecord {
		o.Violate("observer: invocation %d ended with a record's context", inv.id)
	}
	inv.ended = true
	if len(rep.Records) != inv.size {
		o.Violate("observer: invocation %d of %d records ended with a report of %d", inv.id, inv.size, len(rep.Records))
	}
	for i, want := range rep.Records {
		rec := inv.records[i]
		switch {
		case rec == nil:
			o.Violate("observer: record %d of invocation %d (message %s, %s) never started", i, inv.id, want.MessageID, want.Outcome)
		case !rec.ended:
			o.Violate("observer: record %d of invocation %d (message %s) started and never ended", i, inv.id, want.MessageID)
		case rec.rep.Outcome != want.Outcome || rec.rep.Acked != want.Acked || rec.rep.Reason != want.Reason:
			o.Violate("observer: record %s ended as %s (acked %t, reason %q), the invocation reports %s (acked %t, reason %q)",
				want.MessageID, rec.rep.Outcome, rec.rep.Acked, rec.rep.Reason, want.Outcome, want.Acked, want.Reason)
		}
	}
}

// Handler checks that a handler for the message msgID (SQS) or the key
// (Wrap, msgID "") runs under a context descending from its record's
// RecordStart, while that record is open.
func (o *ObserverCheck) Handler(ctx context.Context, msgID, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec, ok := ctx.Value(obsRecordKey{}).(*obsRecord)
	switch {
	case !ok:
		o.Violate("observer: the handler of %s%s runs outside its record's context", msgID, key)
	case rec.ended:
		o.Violate("observer: the handler of %s%s runs after its record %s ended", msgID, key, name(rec.info))
	case msgID != "" && (rec.info.Message == nil || rec.info.Message.MessageId != msgID):
		o.Violate("observer: the handler of message %s runs under the context of record %s", msgID, name(rec.info))
	case msgID == "" && rec.info.Key != key:
		o.Violate("observer: the function for key %s runs under the context of record %s", key, name(rec.info))
	}
}

// Call returns ctx marked for one Wrap call; after the call returned, Done
// checks it was one record whose report agrees with err.
func (o *ObserverCheck) Call(ctx context.Context) (context.Context, *ObservedCall) {
	c := &ObservedCall{}
	return context.WithValue(ctx, obsCallKey{}, c), c
}

// Done checks what the observer saw of a call that returned err: one
// record, acknowledged exactly when err is nil if wrapErr (a Wrap call;
// httpidem answers Wrap's errors with responses).
func (o *ObserverCheck) Done(c *ObservedCall, what string, err error, wrapErr bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case c.starts != 1 || c.ends != 1:
		o.Violate("observer: %s made %d RecordStart and %d RecordEnd calls, want one each", what, c.starts, c.ends)
	case wrapErr && c.rep.Acked != (err == nil):
		o.Violate("observer: %s returned %v, its record ended %s with acked %t", what, err, c.rep.Outcome, c.rep.Acked)
	}
}

// name names a record in a violation.
func name(info lambdaidem.RecordInfo) string {
	if info.Message != nil {
		return info.Message.MessageId
	}
	return string(info.Entry) + " key " + info.Key
}
