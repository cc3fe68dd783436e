package sim

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS is a simulated Amazon SQS: standard and FIFO queues with visibility
// timeouts, receive counts, receipt handles, a redrive policy and its own
// duplicate deliveries. It implements the SQS client interfaces the
// sqsqueue package uses (sink, visibility changer, redrive), so the real
// code runs against it.
type SQS struct {
	w      *World
	queues map[string]*Queue
	ids    int
	bodies map[string]string
	// Fail, when set, is asked before every API call (op is "send",
	// "delete", "change-visibility", "receive"); a non-nil error fails the
	// call before it applies.
	Fail func(op, queueURL string) error
}

// NewSQS returns an SQS service with no queues.
func NewSQS(w *World) *SQS {
	return &SQS{w: w, queues: make(map[string]*Queue), bodies: make(map[string]string)}
}

// Body is the body of the message that was given id, in any queue, even
// after it was deleted ("" for an ID the service never gave).
func (s *SQS) Body(id string) string { return s.bodies[id] }

// Queue is one simulated queue.
type Queue struct {
	svc  *SQS
	URL  string
	ARN  string
	FIFO bool
	// Visibility is the queue's default visibility timeout.
	Visibility time.Duration
	// MaxReceive and DeadLetter are the redrive policy (0: none).
	MaxReceive int
	DeadLetter *Queue
	// DuplicateRate is the chance that a receive hands out a message that
	// is already in flight (SQS's at-least-once delivery).
	DuplicateRate float64
	msgs          []*Message
	dedup         map[string]time.Time
	// groups holds, per message group of a FIFO queue, the messages not
	// deleted yet, in the order they were sent.
	groups map[string][]*Message
	sends  int
	// sent holds every message the queue accepted, in send order.
	sent []*Message
}

// Message is one message in a simulated queue.
type Message struct {
	ID           string
	Body         string
	Attributes   map[string]types.MessageAttributeValue
	GroupID      string
	DedupID      string
	Sent         time.Time
	FirstReceive time.Time
	Receives     int
	VisibleAt    time.Time
	Handle       string
	// Seq is the message's place in its queue's send order (1, 2, ...).
	Seq      int
	inFlight bool
	deleted  bool
}

// NewQueue adds a queue; names ending in .fifo are FIFO queues.
func (s *SQS) NewQueue(name string, visibility time.Duration) *Queue {
	q := &Queue{
		svc:        s,
		URL:        "https://sqs.sim.local/000000000000/" + name,
		ARN:        "arn:aws:sqs:us-east-1:000000000000:" + name,
		FIFO:       strings.HasSuffix(name, ".fifo"),
		Visibility: visibility,
		dedup:      make(map[string]time.Time),
	}
	if q.FIFO {
		q.groups = make(map[string][]*Message)
	}
	s.queues[q.URL] = q
	return q
}

// Queue returns the queue with the given URL, or nil.
func (s *SQS) Queue(url string) *Queue { return s.queues[url] }

// QueueURLs maps every queue's ARN to its URL.
func (s *SQS) QueueURLs() map[string]string {
	m := make(map[string]string, len(s.queues))
	for u, q := range s.queues {
		m[q.ARN] = u
	}
	return m
}

func (s *SQS) newID(prefix string) string {
	s.ids++
	return prefix + strconv.Itoa(s.ids)
}

// Send enqueues a message and returns it (nil when a FIFO queue dropped it
// as a duplicate within the five-minute window).
func (q *Queue) Send(body string, attrs map[string]types.MessageAttributeValue, group, dedup string) *Message {
	now := q.svc.w.now
	if q.FIFO {
		if dedup == "" {
			dedup = body
		}
		if t, ok := q.dedup[dedup]; ok && now.Sub(t) < 5*time.Minute {
			return nil
		}
		q.dedup[dedup] = now
	}
	q.sends++
	m := &Message{ID: q.svc.newID("m-"), Body: body, Attributes: attrs, GroupID: group, DedupID: dedup, Sent: now, VisibleAt: now, Seq: q.sends}
	q.msgs = append(q.msgs, m)
	q.sent = append(q.sent, m)
	q.svc.bodies[m.ID] = body
	if q.FIFO {
		q.groups[group] = append(q.groups[group], m)
	}
	q.svc.w.Logf("sqs %s: sent %s", q.name(), m.ID)
	return m
}

func (q *Queue) name() string { return q.URL[strings.LastIndexByte(q.URL, '/')+1:] }

// Messages returns the messages not deleted, in the order they were sent.
func (q *Queue) Messages() []*Message {
	q.compact()
	return q.msgs
}

// Len is the number of messages not deleted, in flight or not.
func (q *Queue) Len() int { return len(q.Messages()) }

func (q *Queue) compact() {
	n := 0
	for _, m := range q.msgs {
		if !m.deleted {
			q.msgs[n] = m
			n++
		}
	}
	clear(q.msgs[n:])
	q.msgs = q.msgs[:n]
}

// NextVisible is the earliest time a message becomes visible (zero: none).
func (q *Queue) NextVisible() time.Time {
	var t time.Time
	for _, m := range q.msgs {
		if !m.deleted && (t.IsZero() || m.VisibleAt.Before(t)) {
			t = m.VisibleAt
		}
	}
	return t
}

// Receive hands out up to n visible messages, hiding each for visibility,
// as a ReceiveMessage call does. Messages past the redrive policy's
// maxReceiveCount move to the dead-letter queue instead. On a FIFO queue a
// message group is handed out only when none of its messages is in flight,
// and then in order.
func (q *Queue) Receive(n int, visibility time.Duration) []*Message {
	w := q.svc.w
	now := w.now
	var out []*Message
	busy := map[string]bool{}
	if q.FIFO {
		for _, m := range q.msgs {
			if !m.deleted && m.VisibleAt.After(now) {
				busy[m.GroupID] = true
			}
		}
	}
	for _, m := range q.msgs {
		if len(out) == n {
			break
		}
		if m.deleted {
			continue
		}
		visible := !m.VisibleAt.After(now)
		dup := !visible && !q.FIFO && q.DuplicateRate > 0 && m.Receives > 0 && w.rng.Float64() < q.DuplicateRate
		if !visible && !dup {
			continue
		}
		if q.FIFO && busy[m.GroupID] {
			continue
		}
		if q.MaxReceive > 0 && m.Receives >= q.MaxReceive && q.DeadLetter != nil {
			q.remove(m)
			c := *m
			c.ID, c.Receives, c.VisibleAt, c.inFlight, c.deleted = m.ID, 0, now, false, false
			q.DeadLetter.msgs = append(q.DeadLetter.msgs, &c)
			w.Logf("sqs %s: %s moved to %s by the redrive policy", q.name(), m.ID, q.DeadLetter.name())
			continue
		}
		q.handOut(m, visibility)
		out = append(out, m)
		if dup {
			w.Logf("sqs %s: duplicate delivery of %s", q.name(), m.ID)
		}
	}
	for _, m := range out {
		if q.FIFO {
			busy[m.GroupID] = true
		}
	}
	return out
}

// handOut is what a receive does to the message it returns: one more
// receive, a new receipt handle, hidden for visibility.
func (q *Queue) handOut(m *Message, visibility time.Duration) {
	now := q.svc.w.now
	m.Receives++
	if m.FirstReceive.IsZero() {
		m.FirstReceive = now
	}
	m.Handle = q.svc.newID("h-")
	m.VisibleAt = now.Add(visibility)
	m.inFlight = true
}

// find returns the message a receipt handle was last given to, or why not.
func (q *Queue) find(handle string) (*Message, error) {
	for _, m := range q.msgs {
		if !m.deleted && m.Handle == handle {
			return m, nil
		}
	}
	for _, m := range q.msgs {
		if m.deleted && m.Handle == handle {
			return nil, nil
		}
	}
	return nil, errStale
}

var errStale = errors.New("ReceiptHandleIsInvalid: the receipt handle is not the latest")

// Delete deletes the message the handle names. A handle that is no longer
// the latest succeeds without deleting, as SQS documents.
func (q *Queue) Delete(handle string) {
	m, _ := q.find(handle)
	if m != nil {
		q.remove(m)
		q.svc.w.Logf("sqs %s: deleted %s", q.name(), m.ID)
	}
}

// remove marks m deleted and takes it out of its FIFO group.
func (q *Queue) remove(m *Message) {
	m.deleted = true
	if !q.FIFO {
		return
	}
	g := q.groups[m.GroupID]
	for i, o := range g {
		if o == m {
			g = append(g[:i:i], g[i+1:]...)
			break
		}
	}
	if len(g) == 0 {
		delete(q.groups, m.GroupID)
	} else {
		q.groups[m.GroupID] = g
	}
}

// Latest returns the message the receipt handle was last given to, or nil
// when the handle is stale or its message deleted: what a delete with it
// would delete.
func (q *Queue) Latest(handle string) *Message {
	m, _ := q.find(handle)
	return m
}

// EarlierUnfinished returns the messages of m's group on a FIFO queue that
// were sent before m and are not deleted yet, oldest first (none on a
// standard queue). While one of them is unfinished, FIFO order forbids
// running m or acknowledging it.
func (q *Queue) EarlierUnfinished(m *Message) []*Message {
	if !q.FIFO {
		return nil
	}
	g := q.groups[m.GroupID]
	for i, o := range g {
		if o.Seq >= m.Seq {
			return g[:i:i]
		}
	}
	return g
}

// ChangeVisibility makes the message visible after d. It fails for a
// handle that is not the latest or a message no longer in flight.
func (q *Queue) ChangeVisibility(handle string, d time.Duration) error {
	m, err := q.find(handle)
	if err != nil || m == nil {
		return errStale
	}
	now := q.svc.w.now
	if !m.VisibleAt.After(now) {
		return errors.New("MessageNotInflight")
	}
	m.VisibleAt = now.Add(d)
	q.svc.w.Logf("sqs %s: %s visible in %s", q.name(), m.ID, d)
	return nil
}

// Event turns a received message into the record Lambda hands a function.
func (q *Queue) Event(m *Message) events.SQSMessage {
	attrs := map[string]string{
		"ApproximateReceiveCount":          strconv.Itoa(m.Receives),
		"SentTimestamp":                    strconv.FormatInt(m.Sent.UnixMilli(), 10),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.FirstReceive.UnixMilli(), 10),
		"SenderId":                         "AIDASIMULATED",
	}
	if q.FIFO {
		attrs["MessageGroupId"] = m.GroupID
		attrs["MessageDeduplicationId"] = m.DedupID
	}
	var mattrs map[string]events.SQSMessageAttribute
	if len(m.Attributes) > 0 {
		mattrs = make(map[string]events.SQSMessageAttribute, len(m.Attributes))
		for k, v := range m.Attributes {
			mattrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
	}
	return events.SQSMessage{
		MessageId:         m.ID,
		ReceiptHandle:     m.Handle,
		Body:              m.Body,
		Attributes:        attrs,
		MessageAttributes: mattrs,
		EventSource:       "aws:sqs",
		EventSourceARN:    q.ARN,
		AWSRegion:         "us-east-1",
	}
}

func (s *SQS) queue(op string, url *string) (*Queue, error) {
	q := s.queues[aws.ToString(url)]
	if q == nil {
		return nil, errors.New("AWS.SimpleQueueService.NonExistentQueue: " + aws.ToString(url))
	}
	if s.Fail != nil {
		if err := s.Fail(op, q.URL); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// SendMessage implements the SQS API call. A message larger than
// MaxMessageSize (its body and attributes, as SQS counts them) is refused
// as SQS refuses it.
func (s *SQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q, err := s.queue("send", in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if n := messageSize(aws.ToString(in.MessageBody), in.MessageAttributes); n > MaxMessageSize {
		return nil, &apiError{code: "InvalidParameterValue",
			msg: "One or more parameters are invalid. Reason: Message must be shorter than " + strconv.Itoa(MaxMessageSize) + " bytes."}
	}
	m := q.Send(aws.ToString(in.MessageBody), in.MessageAttributes, aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId))
	if m == nil {
		// A FIFO queue answers a deduplicated send with a message ID too.
		return &sqs.SendMessageOutput{MessageId: aws.String(s.newID("m-"))}, nil
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(m.ID)}, nil
}

// ReceiveMessage implements the SQS API call (always short polling).
func (s *SQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q, err := s.queue("receive", in.QueueUrl)
	if err != nil {
		return nil, err
	}
	n := int(in.MaxNumberOfMessages)
	if n <= 0 {
		n = 1
	}
	vis := q.Visibility
	if in.VisibilityTimeout > 0 {
		vis = time.Duration(in.VisibilityTimeout) * time.Second
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range q.Receive(n, vis) {
		ev := q.Event(m)
		out.Messages = append(out.Messages, types.Message{
			MessageId:         aws.String(m.ID),
			ReceiptHandle:     aws.String(m.Handle),
			Body:              aws.String(m.Body),
			Attributes:        ev.Attributes,
			MessageAttributes: m.Attributes,
		})
	}
	return out, nil
}

// DeleteMessage implements the SQS API call.
func (s *SQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q, err := s.queue("delete", in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.Delete(aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

// ChangeMessageVisibility implements the SQS API call.
func (s *SQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q, err := s.queue("change-visibility", in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := q.ChangeVisibility(aws.ToString(in.ReceiptHandle), time.Duration(in.VisibilityTimeout)*time.Second); err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// GetQueueAttributes implements the SQS API call: every queue's
// MaximumMessageSize is MaxMessageSize (the dead-letter sink reads it).
func (s *SQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if _, err := s.queue("get-attributes", in.QueueUrl); err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(types.QueueAttributeNameMaximumMessageSize): strconv.Itoa(MaxMessageSize),
	}}, nil
}

// messageSize is a message's size as SQS counts it against its limit: the
// body and each attribute's name, data type and value.
func messageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// apiError is an SQS error as the SDK returns one: a code and a message
// (the methods of smithy's APIError that callers read).
type apiError struct{ code, msg string }

func (e *apiError) Error() string        { return "api error " + e.code + ": " + e.msg }
func (e *apiError) ErrorCode() string    { return e.code }
func (e *apiError) ErrorMessage() string { return e.msg }

// GetQueueUrl implements the SQS API call (the visibility changer and
// redrive resolve source ARNs with it).
func (s *SQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	for u, q := range s.queues {
		if q.name() == aws.ToString(in.QueueName) {
			return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
		}
	}
	return nil, errors.New("AWS.SimpleQueueService.NonExistentQueue")
}
