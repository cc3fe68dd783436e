package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Every answer checked. A call of the request streams (Wrap, httpidem)
// that did not run the function itself answers from the record it read
// last (the claim that was refused, or a read while it waited):
//
//   - a success must be the stored result of a completion of the call's
//     own key and payload (InvOwnPayload); a record of another payload
//     must be refused as a key conflict (ErrKeyConflict, httpidem's 422
//     idempotency-key-reused), never answered;
//   - that completion's result must still have been kept when the call
//     read the record (InvLateReplay): once WithResultRetention (or the
//     record's retention) ended, a repeat gets ErrLateReplay (httpidem's
//     422 idempotency-key-expired), waiters included.
//
// An SQS record acknowledged as a duplicate must be one of a key that a
// completion of its own payload completed (InvOwnPayload): another
// payload is a key conflict, dead-lettered with its reason.

// checkAnswer holds one call's answer to the store (see above). p is the
// call's invocation; resp is httpidem's response (nil for Wrap, whose
// answer is out or err).
func (s *Scenario) checkAnswer(p *Process, rq request, out reply, resp *events.APIGatewayV2HTTPResponse, err error) {
	ws := s.waits
	if ws == nil || p == nil || ws.ran[p] {
		return
	}
	k, hash := ws.claimKey[p], ws.claimHash[p]
	if k == "" {
		return // it never reached the store
	}
	waited := ""
	if ws.waited[p] {
		waited = ", after waiting for a run in progress"
	}
	success := resp == nil && err == nil || resp != nil && resp.StatusCode/100 == 2
	if !success {
		s.checkRefusal(p, rq, k, hash, resp, err, waited)
		return
	}
	ws.Answers++
	answer, match := s.answerOf(out, resp)
	own := slices.DeleteFunc(slices.Clone(ws.results[k]), func(r stored) bool { return r.hash != hash || !match(r.data) })
	if len(own) == 0 {
		other := "no completion of the key stored it"
		if slices.ContainsFunc(ws.results[k], func(r stored) bool { return match(r.data) }) {
			other = "a completion of another payload stored it: the call must get a key conflict"
		}
		s.violate(InvOwnPayload, "call %s (%s%s) answered %s without running, but no completion of key %s with its own payload stored that answer; %s",
			rq.id(), p.Name, waited, answer, k, other)
		return
	}
	read := ws.lastRead[p].Add(-timeSlack(s.raw))
	if !slices.ContainsFunc(own, func(r stored) bool { return r.until.IsZero() || !r.until.Before(read) }) {
		last := own[len(own)-1].until
		s.violate(InvLateReplay, "call %s (%s%s) replayed %s, the result of a completion of key %s kept until %.3fs, from the record it read at %.3fs: past its retention it must get ErrLateReplay",
			rq.id(), p.Name, waited, answer, k, last.Sub(Epoch).Seconds(), ws.lastRead[p].Sub(Epoch).Seconds())
	}
}

// answerOf is a successful answer as the checker prints it, and the test
// of whether a stored result is that answer: Wrap's result is its JSON,
// httpidem's response its status and body (sameResponse).
func (s *Scenario) answerOf(out reply, resp *events.APIGatewayV2HTTPResponse) (string, func(data []byte) bool) {
	if resp != nil {
		return fmt.Sprintf("%d %q", resp.StatusCode, resp.Body), func(data []byte) bool { return sameResponse(data, resp) }
	}
	got, err := json.Marshal(out)
	if err != nil {
		return fmt.Sprintf("%v (no JSON: %v)", out, err), func([]byte) bool { return false }
	}
	return string(got), func(data []byte) bool { return bytes.Equal(data, got) }
}

// checkRefusal holds a call's error answer to the record it read last:
// a record of another payload (not dead-lettered) must be answered as a
// key conflict. It counts the late replays and conflicts it sees.
func (s *Scenario) checkRefusal(p *Process, rq request, k, hash string, resp *events.APIGatewayV2HTTPResponse, err error, waited string) {
	ws := s.waits
	if late(resp, err) {
		ws.Late++
	}
	conflict := conflictAnswer(resp, err)
	if conflict {
		ws.Conflicts++
	}
	rec, ok := ws.lastRec[p]
	if !ok || rec.Status == idemstore.StatusDeadLettered || rec.PayloadHash == hash || conflict {
		return
	}
	got := fmt.Sprint(err)
	if resp != nil {
		got = fmt.Sprintf("%d %q", resp.StatusCode, resp.Body)
	}
	s.violate(InvOwnPayload, "call %s (%s%s) read key %s %s with another payload and answered %s: another payload's record must be refused as a key conflict",
		rq.id(), p.Name, waited, k, rec.Status, strings.ReplaceAll(got, s.ns, Namespace))
}

// late reports whether an answer is the refusal of a replay whose result
// was no longer kept.
func late(resp *events.APIGatewayV2HTTPResponse, err error) bool {
	if resp != nil {
		return resp.StatusCode == 422 && strings.Contains(resp.Body, `"idempotency-key-expired"`)
	}
	return errors.Is(err, lambdaidem.ErrLateReplay)
}

// conflictAnswer reports whether an answer is a key conflict.
func conflictAnswer(resp *events.APIGatewayV2HTTPResponse, err error) bool {
	if resp != nil {
		return resp.StatusCode == 422 && strings.Contains(resp.Body, `"idempotency-key-reused"`)
	}
	return errors.Is(err, lambdaidem.ErrKeyConflict)
}

// duplicateAnswer holds an SQS record acknowledged as a duplicate to the
// completions the world saw: a completion of its key must have been
// claimed with its body (the payload; a key's bodies differ only in their
// payload fields).
func (s *Scenario) duplicateAnswer(r lambdaidem.RecordReport) {
	body := s.svc.Body(r.MessageID)
	if body == "" {
		return
	}
	if f := s.facts[r.Key]; f == nil || !f.completedBody[body] {
		s.violate(InvOwnPayload, "message %s acknowledged as a duplicate of key %s, but no completion of the key was of its payload: another payload's record must be refused as a key conflict",
			r.MessageID, r.Key)
	}
}

// timeSlack is how much later than asked a store may keep a record or a
// result: the DynamoDB store keeps its times in whole seconds, rounded up
// ("a record is kept at least as long as asked", dynamo/doc.go), so a
// result may still be replayed up to a second after its retention ended.
// The other stores keep milliseconds or the times themselves.
func timeSlack(store idemstore.Store) time.Duration {
	if caps, ok := idemstore.CapabilitiesOf(store); ok && caps.Store == "DynamoDB" {
		return time.Second
	}
	return 0
}
