package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/examples/internal/esm"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// bundle is what a test needs: the function wired to its own tables and
// FIFO queues on the local services.
type bundle struct {
	cfg     Config
	db      *dynamodb.Client
	sqs     *sqs.Client
	queue   esm.Queue
	dlq     esm.Queue
	handler esm.Handler
	mu      sync.Mutex
	reports []lambdaidem.RecordReport
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	t.Parallel()
	// DynamoDB Local sends CRC32 headers that do not match some error
	// responses; the check protects nothing on loopback.
	db := testenv.DynamoDB(t, dynamo.ChecksumsOnAWSOnly())
	b := &bundle{db: db, sqs: testenv.SQS(t)}
	b.queue = esm.NewQueue(t, b.sqs, "fifo", true)
	b.dlq = esm.NewQueue(t, b.sqs, "fifo-dlq", true)
	cfg.IdempotencyTable = esm.IdempotencyTable(t, db)
	cfg.EffectsTable = esm.EffectsTable(t, db)
	cfg.DLQURL = b.dlq.URL
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	b.cfg = cfg
	b.handler = b.newHandler()
	return b
}

func (b *bundle) newHandler() esm.Handler {
	return NewHandler(b.cfg, Deps{
		DynamoDB: b.db,
		SQS:      b.sqs,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
		b.mu.Lock()
		b.reports = append(b.reports, r.Records...)
		b.mu.Unlock()
	}))
}

// send sends {"seq": seq} plus extra fields to group, deduplicated by dedup
// (default group/seq).
func (b *bundle) send(t *testing.T, group string, seq int, extra, dedup string) string {
	t.Helper()
	body := fmt.Sprintf(`{"seq":%d%s}`, seq, extra)
	if dedup == "" {
		dedup = group + "-" + strconv.Itoa(seq)
	}
	return b.queue.Send(t, body, group, dedup)
}

// state reads the effects table: per group, the log of seqs in effect
// order and the number of effect rows per seq.
func (b *bundle) state(t *testing.T) (logs map[string][]int, rows map[string]map[int]int) {
	t.Helper()
	logs, rows = map[string][]int{}, map[string]map[int]int{}
	for _, it := range esm.Scan(t, b.db, b.cfg.EffectsTable) {
		pk := esm.Str(it, attrPK)
		switch {
		case strings.HasPrefix(pk, "group#"):
			l, _ := it[attrSeqs].(*dbtypes.AttributeValueMemberL)
			var seqs []int
			for _, v := range l.Value {
				n, _ := strconv.Atoi(v.(*dbtypes.AttributeValueMemberN).Value)
				seqs = append(seqs, n)
			}
			logs[strings.TrimPrefix(pk, "group#")] = seqs
		case strings.HasPrefix(pk, "effect#"):
			g := esm.Str(it, attrGroup)
			if rows[g] == nil {
				rows[g] = map[int]int{}
			}
			rows[g][esm.Num(it, attrSeq)]++
		default:
			t.Errorf("unexpected item %q in the effects table", pk)
		}
	}
	return logs, rows
}

// checkGroups checks that each group's effects happened once each, in
// exactly the order want gives.
func (b *bundle) checkGroups(t *testing.T, want map[string][]int) {
	t.Helper()
	logs, rows := b.state(t)
	for g, seqs := range want {
		if !slices.Equal(logs[g], seqs) {
			t.Errorf("group %s: effects in order %v, want %v", g, logs[g], seqs)
		}
		for _, s := range seqs {
			if rows[g][s] != 1 {
				t.Errorf("group %s seq %d: %d effect rows, want 1", g, s, rows[g][s])
			}
		}
	}
	for g := range logs {
		if _, ok := want[g]; !ok {
			t.Errorf("group %s has effects %v, want none", g, logs[g])
		}
	}
}

func (b *bundle) outcomes() map[lambdaidem.Outcome]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := map[lambdaidem.Outcome]int{}
	for _, r := range b.reports {
		n[r.Outcome]++
	}
	return n
}

func seqs(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestOrderPerGroupKept(t *testing.T) {
	// Holding records back needs batches with several records of a group.
	testenv.SkipOn(t, testenv.FauxqsOneMessagePerFIFOGroup)
	b := setup(t, Config{})
	// Interleaved groups; a failure in A and two in B hold back the rest of
	// their group (those records are reported failed without running) while
	// C goes on.
	for seq := 1; seq <= 6; seq++ {
		extraA, extraB := "", ""
		if seq == 2 {
			extraA = `,"fail_times":1`
		}
		if seq == 5 {
			extraB = `,"fail_times":2`
		}
		b.send(t, "A", seq, extraA, "")
		b.send(t, "B", seq, extraB, "")
		b.send(t, "C", seq, "", "")
	}
	b.queue.Drain(t, b.handler, 10)

	b.checkGroups(t, map[string][]int{"A": seqs(1, 6), "B": seqs(1, 6), "C": seqs(1, 6)})
	got := b.outcomes()
	if got[lambdaidem.OutcomeFailed] != 3 || got[lambdaidem.OutcomeProcessed] != 18 {
		t.Errorf("outcomes %v, want 3 failed and 18 processed", got)
	}
	if got[lambdaidem.OutcomeSkippedGroup] == 0 {
		t.Errorf("outcomes %v: no record was held back behind a failure in its group", got)
	}
	if n := b.dlq.Count(t); n != 0 {
		t.Errorf("DLQ holds %d messages, want 0", n)
	}
}

func TestRedeliveryAndLateDuplicateHaveOneEffect(t *testing.T) {
	b := setup(t, Config{})
	b.send(t, "A", 1, "", "order-1")
	ev := b.queue.ReceiveSome(t, 10)
	if len(ev.Records) != 1 {
		t.Fatalf("received %d records, want 1", len(ev.Records))
	}
	// The same message again (SQS redelivery), then a copy with a new
	// message ID and the same deduplication ID, as a producer retry after
	// SQS's five-minute deduplication window would arrive.
	late := ev.Records[0]
	late.MessageId = "late-copy-of-" + late.MessageId
	for i, e := range []events.SQSEvent{ev, ev, {Records: []events.SQSMessage{late}}} {
		resp, err := b.handler(context.Background(), e)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invocation %d: failures %v, error %v", i+1, resp.BatchItemFailures, err)
		}
	}
	b.checkGroups(t, map[string][]int{"A": {1}})
	if got := b.outcomes(); got[lambdaidem.OutcomeProcessed] != 1 || got[lambdaidem.OutcomeDuplicate] != 2 {
		t.Errorf("outcomes %v, want one processed and two duplicates", got)
	}
}

func TestPoisonDoesNotBlockItsGroup(t *testing.T) {
	b := setup(t, Config{})
	b.send(t, "A", 1, "", "")
	b.send(t, "A", 2, `,"poison":true`, "")
	b.send(t, "A", 3, "", "")
	b.send(t, "B", 1, "", "")
	b.send(t, "B", 2, "", "")
	b.queue.Drain(t, b.handler, 10)

	b.checkGroups(t, map[string][]int{"A": {1, 3}, "B": {1, 2}})
	msgs := b.dlq.Collect(t, 1)
	if len(msgs) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
	}
	if g := msgs[0].Attributes["MessageGroupId"]; g != "A" {
		t.Errorf("dead letter in group %q, want A", g)
	}
	dl, err := sqsqueue.Parse(msgs[0])
	if err != nil {
		t.Fatalf("parse dead letter: %v", err)
	}
	m := dl.Metadata
	// The message ID is not compared with the one SendMessage returned:
	// when the emulator drops a response, the SDK's retry is deduplicated
	// and may answer with another ID than the stored message's.
	if m.Reason != lambdaidem.ReasonPoison || m.MessageID == "" || m.GroupID != "A" ||
		m.Key != "A-2" || m.Attempts != 1 || !strings.Contains(m.Error, "marked poison") {
		t.Errorf("metadata %+v: want poison of a message in group A, key A-2, attempt 1", m)
	}
}

func TestDedupScope(t *testing.T) {
	// Two groups use the same deduplication ID for different messages,
	// as they may when the queue deduplicates per group. Only with
	// DedupPerGroup are they different keys; without it the second is a
	// key conflict and dead-lettered with that reason, never run, never
	// dropped.
	for _, perGroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("per group %v", perGroup), func(t *testing.T) {
			b := setup(t, Config{DedupPerGroup: perGroup})
			b.send(t, "A", 1, "", "d-1")
			b.send(t, "B", 1, `,"tag":"b"`, "d-1x")
			got := b.queue.ReceiveSome(t, 10)
			for len(got.Records) < 2 {
				more := b.queue.ReceiveSome(t, 10)
				got.Records = append(got.Records, more.Records...)
			}
			// The emulator deduplicates per queue; give B's record A's
			// deduplication ID as a per-group queue would deliver it.
			for i := range got.Records {
				got.Records[i].Attributes["MessageDeduplicationId"] = "d-1"
			}
			var st esm.Stats
			// One record per invocation: A's first, so B's is the
			// conflict when the scope is the queue.
			for _, r := range got.Records {
				b.queue.Invoke(t, b.handler, events.SQSEvent{Records: []events.SQSMessage{r}}, &st)
			}
			if perGroup {
				b.checkGroups(t, map[string][]int{"A": {1}, "B": {1}})
				return
			}
			b.checkGroups(t, map[string][]int{"A": {1}})
			msgs := b.dlq.Collect(t, 1)
			if len(msgs) != 1 {
				t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
			}
			dl, err := sqsqueue.Parse(msgs[0])
			if err != nil || dl.Metadata.Reason != lambdaidem.ReasonKeyConflict {
				t.Errorf("dead letter %+v, %v; want reason key_conflict", dl.Metadata, err)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	full := []string{EnvIdempotencyTable, "idem", EnvEffectsTable, "effects"}
	cases := []struct {
		name string
		env  func(string) string
		want Config
		err  bool
	}{
		{"defaults", env(full...), Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: DefaultNamespace}, false},
		{"everything", env(append(full, EnvNamespace, "shop", EnvDLQURL, "http://q/dlq.fifo", EnvMaxAttempts, "2", EnvDedupPerGroup, "true")...),
			Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: "shop", DLQURL: "http://q/dlq.fifo", MaxAttempts: 2, DedupPerGroup: true}, false},
		{"no tables", env(), Config{}, true},
		{"bad attempts", env(append(full, EnvMaxAttempts, "-1")...), Config{}, true},
		{"bad scope", env(append(full, EnvDedupPerGroup, "group")...), Config{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFromEnv(c.env)
			if c.err {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("error %v, want ErrConfig", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestBuildsForLambda(t *testing.T) {
	t.Parallel()
	path := esm.Build(t, ".", "linux", "arm64")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC || f.Section(".interp") != nil {
		t.Errorf("%s: machine %v, type %v; want a static EM_AARCH64 executable", path, f.Machine, f.Type)
	}
}
