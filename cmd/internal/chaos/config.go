package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrInvalidConfig is wrapped by every error about a Config that cannot run.
var ErrInvalidConfig = errors.New("chaos: invalid config")

// ErrInvariant is wrapped by the error Run returns when the run completed
// but an invariant broke; the Report says which.
var ErrInvariant = errors.New("chaos: invariant broken")

// Store is which idempotency store the function uses.
type Store string

// The stores a run can use.
const (
	// StoreDynamoDB: the DynamoDB store on DynamoDB Local (the default).
	StoreDynamoDB Store = "dynamodb"
	// StoreRedis: the Redis store on the local redis-server (RedisAddr),
	// through a RESP fault proxy. In tx mode each effect is a hash written
	// by a redisstore.Command of the completion's own script; in plain
	// mode it is a PutItem to the effects table, as on DynamoDB.
	StoreRedis Store = "redis"
)

// Mode is which completion the function uses.
type Mode string

// The modes of the chaos function (CHAOS_MODE).
const (
	// ModePlain: the effect is its own PutItem before the handler returns;
	// at-least-once. Duplicate effects are allowed only where a completion
	// was never recorded, and each must show as a re-run in the logs.
	ModePlain Mode = "plain"
	// ModeTx: the effect is committed with the completion
	// (lambdaidem.AddCompletionWrite): a DynamoDB transaction write, or on
	// the Redis store a completion command; exactly once, no duplicate
	// allowed.
	ModeTx Mode = "tx"
	// ModeOptimistic: tx mode's handler under
	// lambdaidem.WithOptimisticCommit: a first delivery takes no claim,
	// and its effect commits with the completion only if no other copy's
	// did; exactly once, no duplicate allowed. A crash is asked of a
	// delivery by its receive count (the first delivery holds no lease,
	// so has no attempt number).
	ModeOptimistic Mode = "optimistic"
)

// committed reports whether the mode commits its effect with the
// completion, so that no duplicate effect is allowed.
func (m Mode) committed() bool { return m == ModeTx || m == ModeOptimistic }

// Config is one chaos run. Zero fields take the defaults documented on
// each; DefaultConfig returns them filled in. A negative rate turns that
// injection off.
type Config struct {
	// Mode is the function's mode. Required.
	Mode Mode
	// Batched runs the function with lambdaidem.WithBatchedWrites: the
	// first record of each fresh group of a batch claimed in one store
	// request, the successes completed in one more (ModePlain and ModeTx;
	// the library refuses it with ModeOptimistic). The invariants are the
	// mode's.
	Batched bool
	// Messages is the number of distinct messages (keys). Duplicates come
	// on top: about DuplicateRate × Messages more sends. Default 10,000:
	// both modes of `make chaos` then take about 9 minutes on a quiet
	// two-core machine (about 40 messages a second per mode under this mix
	// of faults), and about 20 minutes on a loaded one.
	Messages int
	// Seed drives every random choice: which messages are duplicated,
	// crash, are poison or slow, where the duplicates go, and which store
	// requests fail. Zero: a seed from the clock. The same seed gives the
	// same workload and fault plan; the interleaving of processes and
	// pollers is the machine's, so a replay reproduces the conditions, not
	// the exact schedule.
	Seed uint64

	// DuplicateRate is the share of messages sent twice (same body and
	// key, new message ID). Default 0.20.
	DuplicateRate float64
	// DuplicateSpread is how many sends later a duplicate goes at most
	// (uniform from 0): 0 sends it right after its original, often in the
	// same batch; larger spreads it across batches and pollers. Default 50.
	DuplicateSpread int
	// CrashRate is the share of messages whose first attempt exits the
	// process, spread evenly over after_claim, after_effect and
	// during_completion. Default 0.05.
	CrashRate float64
	// PoisonRate is the share of poison messages; at least MinPoison.
	// Default 0.005.
	PoisonRate float64
	// MinPoison is the least number of poison messages. Default 3.
	MinPoison int
	// SlowRate is the share of messages whose handler sleeps SlowFor,
	// longer than the visibility timeout, so SQS delivers them (and their
	// batch-mates) again while they run. Default 0.005.
	SlowRate float64
	// SlowFor is how long a slow handler sleeps. Default 1.5 × Visibility.
	SlowFor time.Duration
	// EmailFaultRate is, in the chain modes, the share of orders whose
	// first email request the email API fails: half with a 504 after
	// sending, half with a 503 without. Default 0.05.
	EmailFaultRate float64
	// FaultRate is the share of the function's DynamoDB requests the
	// proxy faults: throttling, 500, a hang until the client times out
	// (before or after the write applied), or a dropped response. Default
	// 0.02.
	FaultRate float64

	// Pollers is the number of event source mappings (localrun runners)
	// polling the queue at once. Default 2.
	Pollers int
	// Concurrency is each runner's MaxConcurrency. Default 2.
	Concurrency int
	// BatchSize is each mapping's batch size. Default 10.
	BatchSize int
	// Visibility is the source queue's visibility timeout, whole seconds.
	// Default 2s: short, so redeliveries overlap running attempts.
	Visibility time.Duration
	// FunctionTimeout is the function's timeout, and so the lease a
	// crashed attempt leaves behind. Default 5s.
	FunctionTimeout time.Duration
	// MaxAttempts is the function's lambdaidem.WithMaxAttempts. Default 5.
	MaxAttempts int
	// Backlog is the most messages sent and not yet deleted from the
	// source queue: the producer waits for room, as a steady producer
	// would. It keeps the run's pace up on an SQS emulator whose requests
	// cost time in proportion to the queue's depth (moto's do). Default 200.
	Backlog int

	// Bootstrap is the chaos function binary (cmd/lambdaidem-chaos/fn).
	// Empty: Run builds it into a temporary directory (needs the go
	// command and this module's source).
	Bootstrap string
	// DynamoDBEndpoint and SQSEndpoint are the local services. Required
	// (the effects table is in DynamoDB whatever the store).
	DynamoDBEndpoint string
	SQSEndpoint      string
	// Store is the idempotency store. Default StoreDynamoDB.
	Store Store
	// RedisAddr is the redis-server (host:port) of StoreRedis.
	RedisAddr string
	// Region of the services. Default us-east-1.
	Region string

	// DrainTimeout is how long the wait for the queue to drain, once
	// everything was sent, may go without any progress (harness.WaitFor),
	// and, while sending, how long the backlog may go without a single
	// deletion: a bound on a stall, not on the run. Default 10 minutes.
	DrainTimeout time.Duration
	// Progress receives a line every ProgressEvery while the run waits.
	// Default: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// FunctionLog, when set, receives every line the function processes
	// write (JSON).
	FunctionLog io.Writer
	// Keep leaves the tables and queues in place after the run.
	Keep bool
}

// DefaultConfig returns the configuration of `make chaos` for mode,
// endpoints and seed excepted.
func DefaultConfig(mode Mode) Config {
	c := Config{Mode: mode}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&c.Messages, 10000)
	setF(&c.DuplicateRate, 0.20)
	setInt(&c.DuplicateSpread, 50)
	setF(&c.CrashRate, 0.05)
	setF(&c.PoisonRate, 0.005)
	setInt(&c.MinPoison, 3)
	setF(&c.SlowRate, 0.005)
	setF(&c.FaultRate, 0.02)
	setF(&c.EmailFaultRate, 0.05)
	setInt(&c.Pollers, 2)
	setInt(&c.Concurrency, 2)
	setInt(&c.BatchSize, 10)
	setD(&c.Visibility, 2*time.Second)
	setD(&c.SlowFor, c.Visibility*3/2)
	setD(&c.FunctionTimeout, 5*time.Second)
	setInt(&c.MaxAttempts, 5)
	setInt(&c.Backlog, 200)
	setD(&c.DrainTimeout, 10*time.Minute)
	setD(&c.ProgressEvery, 5*time.Second)
	for _, p := range []*float64{&c.DuplicateRate, &c.CrashRate, &c.PoisonRate, &c.SlowRate, &c.FaultRate, &c.EmailFaultRate} {
		*p = max(*p, 0)
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.Store == "" {
		c.Store = StoreDynamoDB
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	rate := func(name string, v float64) error {
		if v > 1 {
			return bad("%s %v above 1", name, v)
		}
		return nil
	}
	switch {
	case c.Mode != ModePlain && c.Mode != ModeTx && c.Mode != ModeOptimistic && !c.Mode.chain():
		return bad("mode %q is not %q, %q, %q or a chain mode (%v)", c.Mode, ModePlain, ModeTx, ModeOptimistic, ChainModes)
	case c.Mode.chain() && (c.Batched || c.Store != StoreDynamoDB):
		return bad("the chain modes run the chain example as it is deployed: on DynamoDB, without batched writes")
	case c.Batched && c.Mode == ModeOptimistic:
		return bad("batched writes have no claim to batch in mode %q", ModeOptimistic)
	case c.Store != StoreDynamoDB && c.Store != StoreRedis:
		return bad("store %q is neither %q nor %q", c.Store, StoreDynamoDB, StoreRedis)
	case c.Store == StoreRedis && c.RedisAddr == "":
		return bad("the redis store needs the redis-server's address")
	case c.Messages < 1:
		return bad("messages %d below 1", c.Messages)
	case c.DynamoDBEndpoint == "" || c.SQSEndpoint == "":
		return bad("the DynamoDB and SQS endpoints are required (local services only)")
	case c.Visibility < time.Second || c.Visibility%time.Second != 0:
		return bad("visibility timeout %s is not a whole number of seconds", c.Visibility)
	case c.DuplicateSpread < 0:
		return bad("duplicate spread %d is negative", c.DuplicateSpread)
	case c.Pollers < 1 || c.Concurrency < 1 || c.BatchSize < 1 || c.BatchSize > 10:
		return bad("pollers %d, concurrency %d and batch size %d (1..10) must be positive", c.Pollers, c.Concurrency, c.BatchSize)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"duplicate rate", c.DuplicateRate}, {"crash rate", c.CrashRate}, {"poison rate", c.PoisonRate}, {"slow rate", c.SlowRate}, {"fault rate", c.FaultRate}, {"email fault rate", c.EmailFaultRate}} {
		if err := rate(r.name, r.v); err != nil {
			return err
		}
	}
	if c.CrashRate+c.PoisonRate+c.SlowRate > 1 {
		return bad("crash, poison and slow rates add up to more than 1")
	}
	return nil
}
