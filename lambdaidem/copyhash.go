package lambdaidem

import "github.com/aws/aws-lambda-go/events"

// copyHash is the payload hash a dead-letter copy of msg carries, so that
// a redrive can tell whether a completion of the key was this message's
// work: the hash the holder's claim stored when it holds a lease on rec,
// else the message's own, derived again ("" when it cannot be). It is
// never the hash of a record that refused the message (a key conflict or a
// key dead-lettered by another message may carry another payload).
func (p *sqsProcessor) copyHash(msg events.SQSMessage, lease *Lease, rec *Record) string {
	if lease != nil && rec != nil {
		return rec.PayloadHash
	}
	if _, hash, err := p.keyAndHash(msg); err == nil {
		return storedHash(hash)
	}
	return ""
}
