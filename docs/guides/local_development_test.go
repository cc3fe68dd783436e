package guides

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

var update = flag.Bool("update", false, "write what this run made into the docs: the samples of docs/local-development.md, the module of docs/getting-started")

const localDevGuide = "../local-development.md"

// The commands of docs/local-development.md that TestLocalDevelopment
// runs, in order; each is in the guide verbatim. Those of the clone run in
// go-lambdaidem, the others in welcome-email, all with the local stack's
// environment (what `eval "$(localstack/stack.sh env)"` exports).
const (
	cmdProvision = `go run ./localstack/provision create -resources ../welcome-email/resources.json`
	cmdInstall   = `go install ./cmd/lambdaidem-local`
	cmdBuild     = `go build -o .local/bootstrap .`
	cmdQueueURL  = `export QUEUE_URL=$(aws sqs get-queue-url --region us-east-1 --endpoint-url "$AWS_ENDPOINT_URL_SQS" --queue-name welcome-email --query QueueUrl --output text)`
	cmdDLQURL    = `export DLQ_URL=$(aws sqs get-queue-url --region us-east-1 --endpoint-url "$AWS_ENDPOINT_URL_SQS" --queue-name welcome-email-dlq --query QueueUrl --output text)`
	cmdRun       = `lambdaidem-local -bootstrap .local/bootstrap -queue-url "$QUEUE_URL" -function-name welcome-email \
  -max-concurrency 1 -timeout 30s -env IDEMPOTENCY_TABLE=welcome-email-idempotency \
  -env IDEMPOTENCY_NAMESPACE=welcome-email -env DLQ_URL="$DLQ_URL"`
	cmdSend    = `go run ./send '{"user_id":"u-1","email":"ada@example.com","name":"Ada"}'`
	cmdSendAWS = `aws sqs send-message --region us-east-1 --endpoint-url "$AWS_ENDPOINT_URL_SQS" --queue-url "$QUEUE_URL" --message-body '{"user_id":"u-1","email":"ada@example.com","name":"Ada"}'`
	cmdSendBad = `go run ./send '{"user_id":"u-2","email":"not an address"}'`

	cmdProvisionQueues = `go run ./localstack/provision create -tables=false -resources ../welcome-email/resources.json`
	cmdBuildRedis      = `go build -o ../welcome-email/.local/redis-bootstrap ./examples/redis`
	cmdRunRedis        = `lambdaidem-local -bootstrap .local/redis-bootstrap -queue-url "$QUEUE_URL" -function-name orders-redis \
  -max-concurrency 1 -timeout 30s -env REDIS_URL="redis+cluster://$LAMBDAIDEM_REDIS_ADDR" \
  -env IDEMPOTENCY_NAMESPACE=orders-redis -env DLQ_URL="$DLQ_URL"`
	cmdSendRedis = `go run ./send '{"order_id":"o-3","amount_cents":700}'`
)

// TestLocalDevelopment runs docs/local-development.md on the local stack:
// the guide's function provisioned from its own resources.json, built,
// run under lambdaidem-local, fed a signup, the same signup again and one
// with an invalid address (with the module's send program and with the
// AWS CLI), and stopped; then the Redis example on the same queues. It
// checks what happened (one email, one duplicate skipped, the invalid
// address in the DLQ with its reason) and, on moto, that the guide's
// samples are this run's output
// but for IDs, times, ports and process IDs (-update writes them).
func TestLocalDevelopment(t *testing.T) {
	testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	testenv.Endpoint(t, testenv.SQSEndpointVar)
	guide, err := os.ReadFile(localDevGuide)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cmdProvision, cmdInstall, cmdBuild, cmdQueueURL, cmdDLQURL, cmdRun, cmdSend, cmdSendAWS, cmdSendBad,
		cmdProvisionQueues, cmdBuildRedis, cmdRunRedis, cmdSendRedis} {
		if !strings.Contains(string(guide), c+"\n") {
			t.Errorf("the guide does not show the command\n%s", c)
		}
	}
	src := layout(t)
	clone, fn := filepath.Join(src, "go-lambdaidem"), filepath.Join(src, consumerName)
	bin := filepath.Join(src, "bin")
	env := offline("GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	fresh(t)
	samples := map[string]string{}

	samples["provision"] = shell(t, clone, env, cmdProvision)
	shell(t, clone, env, cmdInstall)
	shell(t, fn, env, cmdBuild)
	queueURL, dlqURL := lookUp(t, fn, env, cmdQueueURL, "QUEUE_URL", consumerName), lookUp(t, fn, env, cmdDLQURL, "DLQ_URL", consumerName+"-dlq")
	env = append(env, "QUEUE_URL="+queueURL, "DLQ_URL="+dlqURL)

	r := start(t, fn, env, cmdRun)
	samples["send"] = shell(t, fn, env, cmdSend)
	r.waitFor(t, "invoke #1 ")
	if _, err := exec.LookPath("aws"); err == nil {
		samples["send-aws"] = shell(t, fn, env, cmdSendAWS)
	} else {
		t.Log("no aws command on PATH: the same signup sent again with the send program, and the AWS CLI's sample not compared")
		shell(t, fn, env, cmdSend)
	}
	r.waitFor(t, "invoke #2 ")
	shell(t, fn, env, cmdSendBad)
	r.waitFor(t, "invoke #3 ")
	samples["runner"], samples["function"] = r.stop(t)

	for _, want := range []string{"records 3: deleted 3, left for redelivery 0"} {
		if !strings.Contains(samples["runner"], want) {
			t.Errorf("the runner's report lacks %q:\n%s", want, samples["runner"])
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)INFO welcome email to=ada@example.com key=[0-9a-f-]{36}$`),
		regexp.MustCompile(`"DuplicatesSkipped":1,`),
		regexp.MustCompile(`WARN lambdaidem: record dead_lettered namespace=welcome-email key=u-2 .*reason=poison`),
	} {
		if !want.MatchString(samples["function"]) {
			t.Errorf("the function's output does not match %s:\n%s", want, samples["function"])
		}
	}
	if n := strings.Count(samples["function"], "INFO welcome email"); n != 1 {
		t.Errorf("Ada was welcomed %d times, want once:\n%s", n, samples["function"])
	}
	deadLettered(t, dlqURL, "u-2")

	t.Run("redis", func(t *testing.T) {
		addr := testenv.RedisAddr(t)
		env := append(env, "LAMBDAIDEM_REDIS_ADDR="+addr)
		samples["provision-queues"] = shell(t, clone, env, cmdProvisionQueues)
		shell(t, clone, env, cmdBuildRedis)
		r := start(t, fn, env, cmdRunRedis)
		shell(t, fn, env, cmdSendRedis)
		r.waitFor(t, "invoke #1 ")
		runner, function := r.stop(t)
		samples["redis-function"] = function
		if !strings.Contains(runner, "records 1: deleted 1,") || !strings.Contains(function, "order_id=o-3") {
			t.Errorf("the Redis example did not process o-3 once:\n%s\n%s", runner, function)
		}
	})

	if t.Failed() {
		return
	}
	if *update {
		writeSamples(t, guide, samples)
		return
	}
	if em := os.Getenv(testenv.SQSEmulatorVar); em != "moto" {
		t.Logf("samples not compared: SQS is %q, the guide's samples come from moto (queue URLs differ)", em)
		return
	}
	checkSamples(t, guide, samples)
}

// fresh makes the stack look new to the guide: no record of its keys in
// the table or in redis, no message left on its queues.
func fresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	db := testenv.DynamoDB(t, dynamo.ChecksumsOnAWSOnly())
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(consumerName + "-idempotency")}); err == nil {
		w := dynamodb.NewTableNotExistsWaiter(db, func(o *dynamodb.TableNotExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(consumerName + "-idempotency")}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	client := testenv.SQS(t)
	for _, q := range []string{consumerName, consumerName + "-dlq"} {
		if out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err == nil {
			if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: out.QueueUrl}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if addr := os.Getenv(testenv.RedisAddrVar); addr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		iter := rdb.Scan(ctx, 0, "lambdaidem:{orders-redis}:*", 100).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// shell runs a command of the guide with bash in dir and returns its
// output (stdout and stderr, in order).
func shell(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	return command(t, dir, env, "bash", "-c", "set -euo pipefail\n"+script)
}

// lookUp runs an `export NAME=$(aws sqs get-queue-url ...)` command and
// returns NAME's value; without the aws command it asks the SDK instead.
func lookUp(t *testing.T, dir string, env []string, script, name, queue string) string {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		out, err := testenv.SQS(t).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	v := strings.TrimSpace(shell(t, dir, env, script+"\nprintf '%s\\n' \"$"+name+"\""))
	if !strings.HasPrefix(v, "http") {
		t.Fatalf("%s: %q is not a queue URL", script, v)
	}
	return v
}

// runner is a lambdaidem-local started from a command of the guide.
type runner struct {
	cmd         *exec.Cmd
	stdout, err *testenv.Buffer
	done        chan error
}

func start(t *testing.T, dir string, env []string, script string) *runner {
	t.Helper()
	r := &runner{stdout: &testenv.Buffer{}, err: &testenv.Buffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command("bash", "-c", "exec "+script)
	r.cmd.Dir, r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = dir, env, r.stdout, r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	r.waitFor(t, "lambdaidem-local: polling ")
	return r
}

// waitFor waits for the runner to report s on stderr: it runs on its own,
// so the test polls, with a generous bound.
func (r *runner) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for !strings.Contains(r.err.String(), s) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("lambdaidem-local exited (%v) before reporting %q:\n%s\n%s", err, s, r.err.String(), r.stdout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("lambdaidem-local did not report %q within %s:\n%s\n%s", s, testenv.Patience, r.err.String(), r.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends Ctrl-C's signal and returns what the runner wrote on stderr
// and what the function wrote on stdout.
func (r *runner) stop(t *testing.T) (stderr, stdout string) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("lambdaidem-local after Ctrl-C: %v\n%s", err, r.err.String())
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("lambdaidem-local still running %s after Ctrl-C:\n%s", testenv.Patience, r.err.String())
	}
	return r.err.String(), r.stdout.String()
}

// deadLettered checks that the DLQ holds the message of key with the
// reason poison, and nothing else.
func deadLettered(t *testing.T, dlqURL, key string) {
	t.Helper()
	client := testenv.SQS(t)
	deadline := time.Now().Add(testenv.Patience)
	for time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			dl, err := sqsqueue.Parse(m)
			if err != nil {
				t.Fatal(err)
			}
			if dl.Metadata.Key == key && dl.Metadata.Reason == "poison" {
				return
			}
			t.Errorf("the DLQ holds %s (%s), want only %s", dl.Metadata.Key, dl.Metadata.Reason, key)
		}
	}
	t.Errorf("key %s is not in the DLQ", key)
}

// sampleBlock is a guide's marker for a sample: the fenced text block
// after <!-- sample: NAME -->.
var sampleBlock = regexp.MustCompile("(?s)(<!-- sample: (\\S+) -->\\s*```text\\n)(.*?)(```)")

// volatile matches what differs between two runs: IDs, times, durations,
// process IDs and ports.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "ID"},
	{regexp.MustCompile(`"MD5OfMessageBody": "[0-9a-f]{32}"`), `"MD5OfMessageBody": "MD5"`},
	{regexp.MustCompile(`\d{4}/\d\d/\d\d \d\d:\d\d:\d\d`), "TIME"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`"Timestamp":\d+`), `"Timestamp":T`},
	{regexp.MustCompile(`"HandlerLatency":[0-9.]+`), `"HandlerLatency":L`},
	{regexp.MustCompile(` in [0-9.]+(ns|µs|ms|s)\b`), " in D"},
	{regexp.MustCompile(`(process |pid=)\d+`), "${1}PID"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
}

func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// mergedStreams are the samples of a function's output, stdout and stderr
// as lambdaidem-local passes them on: compared line by line, in any order.
var mergedStreams = map[string]bool{"function": true, "redis-function": true}

// sortedLines returns s with its lines sorted.
func sortedLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// checkSamples compares each sample block of the guide with this run's
// output, but for what differs between runs.
func checkSamples(t *testing.T, guide []byte, samples map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range sampleBlock.FindAllSubmatch(guide, -1) {
		name, shown := string(m[2]), string(m[3])
		got, ok := samples[name]
		if !ok {
			if name != "send-aws" { // made only where the aws command is
				t.Errorf("the guide has a sample %q that the test does not make", name)
			}
			continue
		}
		seen[name] = true
		want, have := normalize(shown), normalize(got)
		if mergedStreams[name] {
			// The function's log lines (stderr) and metric lines (stdout)
			// reach the runner through two pipes: their order is the order
			// the runner happened to read them in.
			want, have = sortedLines(want), sortedLines(have)
		}
		if want != have {
			t.Errorf("the guide's sample %q is not what this run printed (go test ./docs/guides -run TestLocalDevelopment -update writes it):\n--- guide\n%s--- run\n%s", name, shown, got)
		}
	}
	for name := range samples {
		if !seen[name] {
			t.Errorf("the guide shows no sample %q (<!-- sample: %s --> before a text block)", name, name)
		}
	}
}

// writeSamples puts this run's output into the guide's sample blocks.
func writeSamples(t *testing.T, guide []byte, samples map[string]string) {
	t.Helper()
	var missing []string
	out := sampleBlock.ReplaceAllFunc(guide, func(block []byte) []byte {
		m := sampleBlock.FindSubmatch(block)
		s, ok := samples[string(m[2])]
		if !ok {
			missing = append(missing, string(m[2]))
			return block
		}
		return []byte(string(m[1]) + s + string(m[4]))
	})
	if len(missing) > 0 {
		t.Fatalf("the guide has samples the test does not make: %v", missing)
	}
	if err := os.WriteFile(localDevGuide, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d samples into %s", len(samples), localDevGuide)
}
