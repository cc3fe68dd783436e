package sqsqueue

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse feeds Parse arbitrary metadata and bodies, as anyone allowed
// to send to the DLQ can. Parse either refuses with ErrNotDeadLetter or
// returns a copy that, written again by the sink's encoder, parses back to
// the same thing. Separately, any attempt time, in any zone, is written in
// a form Parse accepts (or as unknown when the format cannot carry it).
func FuzzParse(f *testing.F) {
	f.Add(`{"v":1,"reason":"poison","attempts":1,"source_arn":"arn:aws:sqs:us-east-1:123456789012:q","message_id":"m","namespace":"ns","key":"k"}`, "body", int64(0), int16(0))
	f.Fuzz(func(t *testing.T, meta, body string, sec int64, offsetMin int16) {
		m := types.Message{Body: &body, MessageAttributes: map[string]types.MessageAttributeValue{
			AttributeName: {DataType: ptr("String"), StringValue: &meta},
		}}
		dm, err := Parse(m)
		if err != nil {
			if !errors.Is(err, ErrNotDeadLetter) {
				t.Fatalf("Parse error %v is not ErrNotDeadLetter", err)
			}
		} else {
			again := reparse(t, dm)
			if d := cmp.Diff(dm, again, cmpopts.EquateEmpty(), attrOpt, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
				t.Fatalf("written and parsed again, the copy changed (-first +again):\n%s", d)
			}
		}

		// Any time the sink is given is written parseable.
		at := time.Unix(sec, 0).In(time.FixedZone("z", int(offsetMin)*60))
		md := sampleMeta()
		md.FirstAttemptAt, md.LastAttemptAt = at, at
		enc, err := encode(md, events.SQSMessage{Body: "b"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(types.Message{Body: ptr("b"), MessageAttributes: enc.attrs})
		if err != nil {
			t.Fatalf("a copy written with attempt time %v does not parse: %v", at, err)
		}
		if !got.Metadata.FirstAttemptAt.Equal(at) && !got.Metadata.FirstAttemptAt.IsZero() {
			t.Fatalf("attempt time %v came back as %v", at, got.Metadata.FirstAttemptAt)
		}
	})
}

// reparse writes a parsed copy again, as the sink would from the original
// message, and parses the result.
func reparse(t *testing.T, dm DeadLetterMessage) DeadLetterMessage {
	t.Helper()
	msg := events.SQSMessage{Body: dm.Body}
	if dm.Attributes != nil {
		msg.MessageAttributes = map[string]events.SQSMessageAttribute{}
		for name, a := range dm.Attributes {
			msg.MessageAttributes[name] = events.SQSMessageAttribute{
				DataType: deref(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue,
				StringListValues: a.StringListValues, BinaryListValues: a.BinaryListValues,
			}
		}
	}
	enc, err := encode(dm.Metadata, msg)
	if err != nil {
		t.Fatalf("encode of a parsed copy: %v", err)
	}
	again, err := Parse(types.Message{Body: &dm.Body, MessageAttributes: enc.attrs})
	if err != nil {
		t.Fatalf("a parsed copy, written again, does not parse: %v", err)
	}
	// Whether the originals travel packed is the encoder's choice.
	again.Packed = dm.Packed
	return again
}

// FuzzARN feeds ParseARN and queue URL resolution arbitrary ARNs, as a
// dead-letter copy's source_arn or an eventSourceARN can carry. An ARN
// that parses prints back exactly; every URL made from it names that
// account and queue on the intended host, with nothing else; and a URL
// SQS answers for another account or queue is refused.
func FuzzARN(f *testing.F) {
	f.Add("arn:aws:sqs:us-east-1:123456789012:q")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseARN(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidARN) {
				t.Fatalf("ParseARN error %v is not ErrInvalidARN", err)
			}
			if _, err := newResolver(fakeGetter{}, "", nil, nil).queueURL(context.Background(), s); !errors.Is(err, ErrInvalidARN) {
				t.Fatalf("resolver accepted an ARN ParseARN refuses: %v", err)
			}
			return
		}
		if a.String() != s {
			t.Fatalf("ParseARN(%q).String() = %q", s, a.String())
		}
		path := "/" + a.Account + "/" + a.Name
		if u, err := QueueURL(s, ""); err == nil {
			checkURL(t, u, "sqs."+a.Region+"."+partitionDomains[a.Partition], path)
		} else if !errors.Is(err, ErrInvalidARN) {
			t.Fatalf("QueueURL(%q): %v", s, err)
		}
		u, err := QueueURL(s, "http://127.0.0.1:4566")
		if err != nil {
			t.Fatalf("QueueURL(%q) with an endpoint: %v", s, err)
		}
		checkURL(t, u, "127.0.0.1:4566", path)

		got, err := newResolver(fakeGetter{}, "", nil, nil).queueURL(context.Background(), s)
		if err != nil || got != "https://sqs.example"+path {
			t.Fatalf("resolved %q to %q, %v", s, got, err)
		}
		other := a
		other.Account = strings.Repeat("9", 12)
		if other.Account == a.Account {
			other.Account = strings.Repeat("8", 12)
		}
		if _, err := newResolver(fakeGetter{answer: other}, "", nil, nil).queueURL(context.Background(), s); err == nil {
			t.Fatalf("accepted SQS's URL of another account's queue for %q", s)
		}
	})
}

func checkURL(t *testing.T, raw, host, path string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("queue URL %q does not parse: %v", raw, err)
	}
	if u.Host != host || u.Path != path || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		t.Fatalf("queue URL %q: host %q path %q; want host %q path %q and nothing else", raw, u.Host, u.Path, host, path)
	}
}

// fakeGetter answers GetQueueUrl with a URL for the queue asked, or for
// answer when set.
type fakeGetter struct{ answer ARN }

func (g fakeGetter) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	acct, name := deref(in.QueueOwnerAWSAccountId), deref(in.QueueName)
	if g.answer.Name != "" {
		acct, name = g.answer.Account, g.answer.Name
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: ptr("https://sqs.example/" + acct + "/" + name)}, nil
}

func (fakeGetter) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return nil, errors.New("not used")
}
