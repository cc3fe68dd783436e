package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Item is one item of a table, as the SDK returns it.
type Item = map[string]dbtypes.AttributeValue

// ScanTable reads a whole table with consistent reads, in segments
// parallel scans, and calls each with every item (serialised: each needs
// no lock). The facts a run is judged on: an effects table holds a row per
// execution of the effect, never deduplicated.
func ScanTable(ctx context.Context, client *dynamodb.Client, table string, segments int, each func(Item)) error {
	segments = max(segments, 1)
	var mu sync.Mutex
	errs := make([]error, segments)
	var wg sync.WaitGroup
	for seg := range segments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
			if segments > 1 {
				in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segments))
			}
			p := dynamodb.NewScanPaginator(client, in)
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					errs[seg] = fmt.Errorf("scan %s: %w", table, err)
					return
				}
				mu.Lock()
				for _, it := range page.Items {
					each(it)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Str is an item's string attribute, "" when it is not one.
func Str(v dbtypes.AttributeValue) string {
	if s, ok := v.(*dbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// Num is an item's number attribute as written, "" when it is not one.
func Num(v dbtypes.AttributeValue) string {
	if n, ok := v.(*dbtypes.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

// CountBy counts a table's items by the string attribute attr.
func (h *Harness) CountBy(ctx context.Context, table, attr string) (map[string]int, error) {
	counts := map[string]int{}
	err := ScanTable(ctx, h.DynamoDB, table, 4, func(it Item) { counts[Str(it[attr])]++ })
	return counts, err
}

// Count counts a table's items with a paginated COUNT scan: nothing but
// the number crosses the wire.
func (h *Harness) Count(ctx context.Context, table string) (int, error) {
	total := 0
	p := dynamodb.NewScanPaginator(h.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(table), Select: dbtypes.SelectCount, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", table, err)
		}
		total += int(out.Count)
	}
	return total, nil
}

// DeadLetter is one message of the DLQ.
type DeadLetter struct {
	MessageID string
	// Body is the original message's body: the library's copy carries it
	// unchanged, and a message SQS's redrive moved is the original.
	Body string
	// Library reports whether the library dead-lettered the message (with
	// its metadata); a message without it was moved by SQS's redrive
	// policy, the backstop. Err is why it is not the library's, when it
	// carries metadata that does not parse.
	Library bool
	Err     error
	// Key, Reason and Attempts are the library's metadata.
	Key      string
	Reason   idemstore.Reason
	Attempts int
}

// ReadDLQ receives every message of the run's DLQ once (a long visibility
// timeout keeps read ones out of the way: the queue is deleted after) and
// reads the library's metadata through sqsqueue.Parse. It stops when a
// receive comes back empty and the queue says it holds no visible message.
func (h *Harness) ReadDLQ(ctx context.Context) ([]DeadLetter, error) {
	if h.dlqURL == "" {
		return nil, nil
	}
	var out []DeadLetter
	seen := map[string]bool{}
	var wait int32
	for empty := 0; ; {
		resp, err := h.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(h.dlqURL),
			MaxNumberOfMessages:   10,
			VisibilityTimeout:     600,
			WaitTimeSeconds:       wait,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, fmt.Errorf("read DLQ: %w", err)
		}
		if len(resp.Messages) == 0 {
			n, err := h.visible(ctx, h.dlqURL)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			// SQS's short poll may miss messages; long-poll, boundedly.
			if empty++; empty > 10 {
				return nil, fmt.Errorf("read DLQ: %d messages visible but none received", n)
			}
			wait = 1
			continue
		}
		for _, m := range resp.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, deadLetter(m))
		}
	}
}

func deadLetter(m types.Message) DeadLetter {
	d := DeadLetter{MessageID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)}
	dl, err := sqsqueue.Parse(m)
	switch {
	case err == nil:
		d.Library, d.Body = true, dl.Body
		d.Key, d.Reason, d.Attempts = dl.Metadata.Key, dl.Metadata.Reason, dl.Metadata.Attempts
	case !errors.Is(err, sqsqueue.ErrNotDeadLetter):
		d.Err = err
	}
	return d
}

// visible is a queue's ApproximateNumberOfMessages.
func (h *Harness) visible(ctx context.Context, url string) (int, error) {
	attr := types.QueueAttributeNameApproximateNumberOfMessages
	out, err := h.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{attr},
	})
	if err != nil {
		return 0, fmt.Errorf("queue attributes: %w", err)
	}
	var n int
	if _, err := fmt.Sscan(out.Attributes[string(attr)], &n); err != nil {
		return 0, fmt.Errorf("queue attribute %s: %w", attr, err)
	}
	return n, nil
}

// ReadRecords reads the idempotency record of every key in one namespace,
// a few at a time; a key without a record is left out.
func ReadRecords(ctx context.Context, store idemstore.Store, namespace string, keys []string) (map[string]idemstore.Record, error) {
	const workers = 8
	work := make(chan string)
	var mu sync.Mutex
	out := make(map[string]idemstore.Record, len(keys))
	var firstErr error
	var wg sync.WaitGroup
	now := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				rec, err := store.Get(ctx, idemstore.GetRequest{Namespace: namespace, Key: k, Now: now})
				mu.Lock()
				switch {
				case errors.Is(err, idemstore.ErrNotFound):
				case err != nil:
					if firstErr == nil {
						firstErr = fmt.Errorf("read idempotency record %s: %w", k, err)
					}
				default:
					out[k] = rec
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return out, firstErr
}

// Tally is what a run left behind, key by key: how many effects each has
// and the reasons of its DLQ messages. The invariant every driver checks is
// on it: every key has an effect or a DLQ message (Lost), and no key has
// more effects than its mode allows (Duplicates).
type Tally struct {
	Effects map[string]int
	DLQ     map[string][]string
}

// Lost returns the keys with neither an effect nor a DLQ message, in
// order.
func (t Tally) Lost(keys []string) []string {
	var lost []string
	for _, k := range keys {
		if t.Effects[k] == 0 && len(t.DLQ[k]) == 0 {
			lost = append(lost, k)
		}
	}
	return lost
}

// Duplicates maps the keys with more than one effect to their count.
func (t Tally) Duplicates(keys []string) map[string]int {
	dup := map[string]int{}
	for _, k := range keys {
		if n := t.Effects[k]; n > 1 {
			dup[k] = n
		}
	}
	return dup
}

// CountList formats counts as "a 2, b 1" (most first, then by name), or
// "-" when there are none.
func CountList(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Sample joins the first five of a list and says how many more there are.
func Sample(s []string) string {
	const n = 5
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(", ... (%d more)", len(s)-n)
}

// Verdict is a report's cell for a check: "FAIL" when bad, else "ok".
func Verdict(bad bool) string {
	if bad {
		return "FAIL"
	}
	return "ok"
}
