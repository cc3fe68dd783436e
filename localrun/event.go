package localrun

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// buildEvent turns received messages into the event Lambda sends for an
// SQS batch, records in receive order.
func (r *Runner) buildEvent(batch []types.Message) ([]byte, error) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(batch))}
	for _, m := range batch {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             make(map[string]string, len(m.Attributes)),
			MessageAttributes:      make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes)),
			EventSource:            "aws:sqs",
			EventSourceARN:         r.queueARN,
			AWSRegion:              r.region,
		}
		// Lambda passes the system attributes SQS returned, as strings.
		for k, v := range m.Attributes {
			rec.Attributes[k] = v
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue: v.StringValue,
				BinaryValue: v.BinaryValue,
				// Lambda always sends both list fields, empty: SQS
				// reserves them and never fills them.
				StringListValues: emptyIfNil(v.StringListValues),
				BinaryListValues: emptyIfNilBytes(v.BinaryListValues),
				DataType:         aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return json.Marshal(ev)
}

func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func emptyIfNilBytes(s [][]byte) [][]byte {
	if s == nil {
		return [][]byte{}
	}
	return s
}

func receiveCount(m types.Message) int {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return n
}

// failedItems reads a partial batch response. It returns the message IDs
// to keep, or ok=false when Lambda would fail the whole batch: a response
// that is not a JSON object, or an entry whose itemIdentifier is missing,
// null, empty, not a string, or not the ID of a record in the batch. An
// empty or null response, or a missing or null list, means all succeeded.
func failedItems(resp []byte, batchIDs map[string]bool) (failed map[string]bool, ok bool, why string) {
	failed = map[string]bool{}
	trimmed := bytes.TrimSpace(resp)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return failed, true, ""
	}
	var body struct {
		BatchItemFailures []map[string]json.RawMessage `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(trimmed, &body); err != nil {
		return nil, false, fmt.Sprintf("response is not a partial batch response: %v", err)
	}
	for i, item := range body.BatchItemFailures {
		raw, present := item["itemIdentifier"]
		if !present {
			return nil, false, fmt.Sprintf("batchItemFailures[%d] has no itemIdentifier", i)
		}
		var id *string
		if err := json.Unmarshal(raw, &id); err != nil || id == nil || *id == "" {
			return nil, false, fmt.Sprintf("batchItemFailures[%d].itemIdentifier is null, empty or not a string", i)
		}
		if !batchIDs[*id] {
			return nil, false, fmt.Sprintf("batchItemFailures[%d].itemIdentifier %q is not a message of the batch", i, *id)
		}
		failed[*id] = true
	}
	return failed, true, ""
}

// newUUID returns a random (version 4) UUID, the shape of a Lambda request ID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func newHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newTraceID returns an X-Ray trace header, as Lambda passes in
// Lambda-Runtime-Trace-Id, not sampled.
func newTraceID(now time.Time) string {
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", now.Unix(), newHex(24), newHex(16))
}
