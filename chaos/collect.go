package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// effectRow is one row of the effects table: one execution of the effect.
type effectRow struct {
	key       string
	attempt   int
	requestID string
}

// dlqEntry is one message of the DLQ as sqsqueue.Parse reads it.
type dlqEntry struct {
	key      string
	reason   lambdaidem.Reason
	attempts int
	parsed   bool
}

// facts are what the run left behind: the ground truth the invariants are
// checked against.
type facts struct {
	effects map[string][]effectRow // key -> rows
	dlq     []dlqEntry
	records map[string]lambdaidem.Record // key -> idempotency record, if any
}

// collect reads the run's results and builds the report's observations.
func (r *run) collect(ctx context.Context) (Report, error) {
	var f facts
	var err error
	if f.effects, err = r.scanEffects(ctx); err != nil {
		return Report{}, err
	}
	if f.dlq, err = r.readDLQ(ctx); err != nil {
		return Report{}, err
	}
	if f.records, err = r.readRecords(ctx); err != nil {
		return Report{}, err
	}
	return r.report(f), nil
}

// scanEffects reads the whole effects table with a parallel scan.
func (r *run) scanEffects(ctx context.Context) (map[string][]effectRow, error) {
	const segments = 4
	var mu sync.Mutex
	out := map[string][]effectRow{}
	errs := make([]error, segments)
	var wg sync.WaitGroup
	for seg := range segments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := dynamodb.NewScanPaginator(r.ddb, &dynamodb.ScanInput{
				TableName:      aws.String(r.effectsTable),
				Segment:        aws.Int32(int32(seg)),
				TotalSegments:  aws.Int32(segments),
				ConsistentRead: aws.Bool(true),
			})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					errs[seg] = fmt.Errorf("scan effects: %w", err)
					return
				}
				mu.Lock()
				for _, it := range page.Items {
					row := effectRow{key: str(it["key"]), requestID: str(it["request_id"])}
					row.attempt, _ = strconv.Atoi(num(it["attempt"]))
					out[row.key] = append(out[row.key], row)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func str(v dbtypes.AttributeValue) string {
	if s, ok := v.(*dbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func num(v dbtypes.AttributeValue) string {
	if n, ok := v.(*dbtypes.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

// readDLQ receives every message of the DLQ once (a long visibility
// timeout keeps read ones out of the way) and parses its metadata.
func (r *run) readDLQ(ctx context.Context) ([]dlqEntry, error) {
	var out []dlqEntry
	for empty := 0; empty < 2; {
		res, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(r.dlqURL),
			MaxNumberOfMessages:   10,
			VisibilityTimeout:     600,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, fmt.Errorf("read DLQ: %w", err)
		}
		if len(res.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range res.Messages {
			out = append(out, parseDLQ(m))
		}
	}
	return out, nil
}

func parseDLQ(m types.Message) dlqEntry {
	dl, err := sqsqueue.Parse(m)
	if err != nil {
		return dlqEntry{}
	}
	return dlqEntry{key: dl.Metadata.Key, reason: dl.Metadata.Reason, attempts: dl.Metadata.Attempts, parsed: true}
}

// readRecords reads the idempotency record of every key, a few at a time.
func (r *run) readRecords(ctx context.Context) (map[string]lambdaidem.Record, error) {
	const workers = 8
	var store lambdaidem.Store = dynamo.New(r.ddb, r.idemTable)
	if r.cfg.Store == StoreRedis {
		client := redis.NewClient(&redis.Options{Addr: r.cfg.RedisAddr})
		defer client.Close()
		store = redisstore.New(client, redisstore.Options{Prefix: r.redisPrefix})
	}
	keys := make(chan string)
	var mu sync.Mutex
	out := make(map[string]lambdaidem.Record, len(r.workload.Messages))
	var firstErr error
	var wg sync.WaitGroup
	now := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				rec, err := store.Get(ctx, lambdaidem.GetRequest{Namespace: Namespace, Key: k, Now: now})
				mu.Lock()
				switch {
				case errors.Is(err, lambdaidem.ErrNotFound):
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
	for _, m := range r.workload.Messages {
		keys <- m.Key
	}
	close(keys)
	wg.Wait()
	return out, firstErr
}
