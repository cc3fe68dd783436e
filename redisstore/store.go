package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// ErrInvalidKey: a namespace or key the store cannot keep (a namespace
// with '{' or '}', which would break the cluster hash tag).
var ErrInvalidKey = errors.New("redisstore: invalid key")

// Defaults of the options.
const (
	DefaultPrefix         = "lambdaidem"
	DefaultLastErrorBytes = 4096
	DefaultMaxResultBytes = 1 << 20
	DefaultExpirySlack    = time.Minute
	// DefaultInlineResultBytes is the largest result kept in the record's
	// own hash; see WithInlineResultBytes.
	DefaultInlineResultBytes = 1024
	// DefaultMaxRequestArgs is the most arguments one request to the
	// server carries (the command's name included): ElastiCache
	// Serverless refuses a request of more than 3,999, whole, before
	// running anything; see WithMaxRequestArgs.
	DefaultMaxRequestArgs = 3999
)

// Option configures a Store.
type Option func(*Store)

// WithLastErrorBytes sets how many bytes of an error's text are stored
// (default DefaultLastErrorBytes; values below 64 become 64). Longer texts
// are cut and marked.
func WithLastErrorBytes(n int) Option {
	return func(s *Store) { s.errLimit = max(n, 64) }
}

// WithMaxResultBytes bounds a stored result (default DefaultMaxResultBytes,
// 1 MiB; values of 0 or less keep the default): a larger one fails
// Complete with ErrResultTooLarge, recording nothing.
func WithMaxResultBytes(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.maxRes = n
		}
	}
}

// WithInlineResultBytes sets the largest result kept in the record's hash
// (default DefaultInlineResultBytes; negative values become 0, so that
// every non-empty result is kept apart). A larger result is kept apart, in
// a hash of its own under the same hash tag, written by the same script as
// the completion: every script reads the whole record, and a refused claim
// returns it, so a record that holds a large result would make every
// duplicate and every conflicting claim carry it. A claim that replays the
// result reads it in the same script, still one round trip.
func WithInlineResultBytes(n int) Option {
	return func(s *Store) { s.inline = max(n, 0) }
}

// WithExpirySlack sets how long after a record's ExpiresAt the server
// deletes its key (default DefaultExpirySlack, a minute; values of 0 or
// less keep the default). The scripts treat a record as absent from
// ExpiresAt on by the caller's clock; the slack keeps a server whose clock
// runs ahead from deleting a record early.
func WithExpirySlack(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.slack = d
		}
	}
}

// WithMaxRequestArgs sets the most arguments one request to the server
// may carry, the command's name, the script's SHA and its keys included
// (default DefaultMaxRequestArgs, 3,999, what ElastiCache Serverless
// takes; values below 64 become 64). A completion whose commands would
// make a longer request is refused when the handler adds the command that
// breaks the limit, with ErrRequestTooLarge, rather than refused by the
// server on every try; batched claims and completions go out in as many
// script calls as the limit needs. A server of your own (Redis OSS,
// Valkey, ElastiCache node-based clusters, MemoryDB) takes far more:
// raise it there to commit commands of more arguments.
func WithMaxRequestArgs(n int) Option {
	return func(s *Store) { s.maxArgs = max(n, minRequestArgs) }
}

// Store is the Redis implementation of [idemstore.Store] (Redis OSS 7,
// Valkey, ElastiCache, MemoryDB). It is safe for concurrent use and holds
// no state besides its configuration.
type Store struct {
	client   redis.UniversalClient
	prefix   string
	errLimit int
	maxRes   int
	inline   int
	slack    time.Duration
	maxArgs  int // arguments of one request (WithMaxRequestArgs)
	maxBytes int // bytes of one request's arguments (MaxRequestBytes)
}

var _ idemstore.Store = (*Store)(nil)

// New returns a Store on client (a *redis.Client, a *redis.ClusterClient
// or any other redis.UniversalClient) whose keys all start with prefix, so
// one database can hold other data, or two stores, side by side; an empty
// prefix is DefaultPrefix. A nil client, or a prefix holding '{' or '}' (it
// would change the cluster hash tag, so one namespace's keys could fall in
// several slots), is refused at once: New panics with a
// *idemstore.ConfigError wrapping idemstore.ErrInvalidOption, as the
// decorators do for options that could never work.
func New(client redis.UniversalClient, prefix string, opts ...Option) *Store {
	if client == nil || reflect.ValueOf(client).Kind() == reflect.Pointer && reflect.ValueOf(client).IsNil() {
		panic(&idemstore.ConfigError{Handler: "redisstore.New", Option: "client", Err: fmt.Errorf("%w: the Redis client is nil", idemstore.ErrInvalidOption)})
	}
	if strings.ContainsAny(prefix, "{}") {
		panic(&idemstore.ConfigError{Handler: "redisstore.New", Option: "prefix",
			Err: fmt.Errorf("%w: the prefix %q holds '{' or '}', which delimit the cluster hash tag", idemstore.ErrInvalidOption, prefix)})
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &Store{
		client:   client,
		prefix:   prefix,
		errLimit: DefaultLastErrorBytes,
		maxRes:   DefaultMaxResultBytes,
		inline:   DefaultInlineResultBytes,
		slack:    DefaultExpirySlack,
		maxArgs:  DefaultMaxRequestArgs,
		maxBytes: MaxRequestBytes,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Client returns the client the store uses.
func (s *Store) Client() redis.UniversalClient { return s.client }

// keyExpiry is the key's PEXPIREAT argument for a record expiring at t:
// "" (no expiry) for the zero time, else t plus the slack.
func (s *Store) keyExpiry(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return msArg(t.Add(s.slack))
}

// unavailable wraps an error of the client or the server. Whatever it was
// (a lost connection, a timeout, OOM, READONLY after a failover, a script
// error) the transition either did not happen or cannot be confirmed, so
// the caller must not acknowledge anything on it.
func unavailable(op, key string, err error) error {
	return fmt.Errorf("%w: redisstore %s %q: %w", idemstore.ErrStoreUnavailable, op, key, err)
}

// Claim takes the lease on a key in one script call. A refused claim
// returns the record that refused it, read by the same script; a result
// kept apart comes with it only when the claim is a replay (the record is
// COMPLETED with the claim's payload hash and its result has not expired).
func (s *Store) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	c, err := s.claimCall(req)
	if err != nil {
		return idemstore.ClaimResult{}, err
	}
	return c.reply(c.script.Run(ctx, s.client, c.keys.all(), c.args...).Slice())
}

// claimCall is one claim's script call, and how to read its reply.
type claimCall struct {
	req    idemstore.ClaimRequest
	keys   keys
	script *redis.Script
	batch  *redis.Script // script's batch form, for ClaimBatch
	args   []any
}

// claimCall validates a claim and builds its script call.
func (s *Store) claimCall(req idemstore.ClaimRequest) (*claimCall, error) {
	k, err := s.keysOf("claim", req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	noTakeover := "0"
	if req.NoTakeover {
		noTakeover = "1"
	}
	token := rand.Text()
	script, batch := claimScript, claimManyScript
	if mutant.On("redis-failed-reclaimed-by-other-payload") {
		step := strings.Replace(claimStep, "elseif r.h ~= hash then", "elseif r.h ~= hash and r.s ~= 'FAILED' then", 1)
		script, batch = redis.NewScript(one(prelude, step)), redis.NewScript(many(prelude, step))
	}
	return &claimCall{req: req, keys: k, script: script, batch: batch, args: []any{
		strconv.FormatInt(ceilMillis(req.Now), 10), token, rand.Text(), req.PayloadHash, req.MessageID,
		msArg(req.LeaseUntil), req.Grace.Milliseconds(), msArg(req.ExpiresAt), noTakeover,
		s.keyExpiry(req.ExpiresAt), idemstore.SchemaVersion, k.member,
	}}, nil
}

// reply reads the claim script's reply.
func (c *claimCall) reply(v []any, err error) (idemstore.ClaimResult, error) {
	req, k := c.req, c.keys
	if err != nil {
		return idemstore.ClaimResult{}, unavailable("claim", k.record, err)
	}
	if len(v) != 3 && len(v) != 5 {
		return idemstore.ClaimResult{}, unavailable("claim", k.record, fmt.Errorf("unexpected reply of %d elements", len(v)))
	}
	h, err := fromFlat(v[2])
	if err != nil {
		return idemstore.ClaimResult{}, unavailable("claim", k.record, err)
	}
	rec := decode(req.Namespace, req.Key, h)
	switch v[0] {
	case "claimed", "own":
		// "own": the client re-sent a claim whose first try applied and
		// whose reply was lost; the token is fresh, so only our own
		// script can have put it there.
		prev, _ := v[1].(string)
		return idemstore.ClaimResult{Claimed: true, Lease: rec.Lease(), Previous: idemstore.Status(prev), Record: rec}, nil
	default:
		if len(v) == 5 {
			if rec, err = withApart(rec, v[3], v[4]); err != nil {
				return idemstore.ClaimResult{}, unavailable("claim", k.record, err)
			}
		}
		return idemstore.ClaimResult{Record: rec}, nil
	}
}

// withApart is rec with the result its apart hash holds (token and result
// as HMGET gave them). The completion wrote both in one script, and a new
// generation deletes the hash, so a token that is not the record's means
// someone changed the keys by hand: that is an error, never another
// generation's result.
func withApart(rec idemstore.Record, token, result any) (idemstore.Record, error) {
	t, _ := token.(string)
	r, ok := result.(string)
	if !ok || t != rec.LeaseToken {
		return idemstore.Record{}, errors.New("the result of this completion is missing")
	}
	rec.Result = []byte(r)
	return rec, nil
}

// write is a fenced write's changes: fields to set and to delete, the
// status it leaves, the record's new expiry (keep: unchanged), and what
// becomes of the result kept apart.
type write struct {
	target    idemstore.Status
	set       []any // field, value, field, value...
	del       []any
	expiresAt time.Time
	keep      bool
	apart     apartOp
	cmds      []Command // a completion's commands, run in the same step
}

// apartOp is what a write does to the hash that holds a result apart:
// leave it (""), delete it ("del"), or write result into it ("set"),
// expiring at until (never when zero).
type apartOp struct {
	op     string
	until  time.Time
	result []byte
}

// finish runs the fenced write script.
func (s *Store) finish(ctx context.Context, op string, l idemstore.Lease, now time.Time, w write) error {
	c, err := s.finishCall(op, l, now, w)
	if err != nil {
		return err
	}
	return c.reply(finishScript.Run(ctx, s.client, c.scriptKeys, c.args...).StringSlice())
}

// finishCall is one fenced write's script call, and how to read its
// reply.
type finishCall struct {
	op         string
	keys       keys
	scriptKeys []string // keys, then the keys of the commands
	args       []any
	cmds       []Command
}

// finishCall validates a fenced write and builds its script call.
func (s *Store) finishCall(op string, l idemstore.Lease, now time.Time, w write) (*finishCall, error) {
	k, err := s.keysOf(op, l.Namespace, l.Key)
	if err != nil {
		return nil, err
	}
	ea, exp := "-", "-"
	if !w.keep {
		ea, exp = msArg(w.expiresAt), s.keyExpiry(w.expiresAt)
	}
	args := make([]any, 0, 12+len(w.set)+len(w.del))
	args = append(args, strconv.FormatInt(ceilMillis(now), 10), l.Token, string(w.target), k.member, ea, exp,
		w.apart.op, s.keyExpiry(w.apart.until), w.apart.result, len(w.set)/2, len(w.del))
	args = append(args, w.set...)
	args = append(args, w.del...)
	scriptKeys, args := encodeCommands(w.cmds, k.all(), args)
	if err := s.checkRequest(op, k.record, scriptKeys, args, len(w.cmds)); err != nil {
		return nil, err
	}
	return &finishCall{op: op, keys: k, scriptKeys: scriptKeys, args: args, cmds: w.cmds}, nil
}

// reply reads the fenced write script's reply.
func (c *finishCall) reply(v []string, err error) error {
	op, k := c.op, c.keys
	if err != nil {
		return unavailable(op, k.record, err)
	}
	if len(v) == 0 {
		return unavailable(op, k.record, errors.New("empty reply"))
	}
	var why string
	switch v[0] {
	case "ok", "done":
		// "done": our token with the target status already, a retry of a
		// write whose reply was lost.
		return nil
	case "refused":
		i, _ := strconv.Atoi(v[1])
		if i < 1 || i > len(c.cmds) || len(v) != 3 {
			return unavailable(op, k.record, fmt.Errorf("unexpected refusal %q", v))
		}
		cmd := c.cmds[i-1]
		return fmt.Errorf("redisstore %s %q: %w", op, k.record, &CommandError{Index: i - 1, Op: cmd.Op, Key: cmd.Key, Reason: v[2]})
	case "gone":
		why = "the record is gone"
	case "expired":
		why = "the record expired"
	case "taken":
		why = "the lease was taken over"
		if len(v) == 4 {
			why = fmt.Sprintf("the lease was taken over (now %s, claim %s of generation %s)", v[1], v[3], v[2])
		}
	default:
		why = "the record is already " + v[len(v)-1]
	}
	return fmt.Errorf("%w: redisstore %s %q: %s", idemstore.ErrLeaseLost, op, k.record, why)
}

// Complete moves a leased record to COMPLETED with its result, in one
// script call. A result larger than WithInlineResultBytes is written
// apart from the record by the same script. Extra Writes must be
// Commands: the same script runs them, atomically with the completion and
// fenced by the lease (see Command); a command that refuses the
// completion yields a *CommandError (idemstore.ErrWriteRefused) and
// nothing is recorded. Any other write type is refused with
// idemstore.ErrUnsupportedWrite, a malformed command with
// ErrInvalidCommand, a key outside the record's slot with ErrCrossSlot,
// all before anything is sent.
func (s *Store) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	w, err := s.completeWrite(req)
	if err != nil {
		return err
	}
	return s.finish(ctx, "complete", req.Lease, req.Now, w)
}

// completeWrite is the fenced write of a completion, its commands
// checked.
func (s *Store) completeWrite(req idemstore.CompleteRequest) (write, error) {
	k, err := s.keysOf("complete", req.Lease.Namespace, req.Lease.Key)
	if err != nil {
		return write{}, err
	}
	cmds, err := s.commandsOf(k, req.Writes)
	if err != nil {
		return write{}, fmt.Errorf("redisstore complete %q: %w", k.record, err)
	}
	if len(req.Result) > s.maxRes {
		return write{}, fmt.Errorf("%w: redisstore complete %q: result of %d bytes, over the store's %d",
			idemstore.ErrResultTooLarge, k.record, len(req.Result), s.maxRes)
	}
	w := write{target: idemstore.StatusCompleted, expiresAt: req.ExpiresAt, cmds: cmds}
	switch {
	case len(req.Result) > s.inline:
		w.set = append(w.set, fResultApart, len(req.Result))
		w.del = append(w.del, fResult)
		w.apart = apartOp{op: "set", until: earliest(req.ResultUntil, req.ExpiresAt), result: req.Result}
	case len(req.Result) > 0:
		w.set = append(w.set, fResult, req.Result)
		w.del = append(w.del, fResultApart)
		w.apart.op = "del"
	default:
		w.del = append(w.del, fResult, fResultApart)
		w.apart.op = "del"
	}
	if req.ResultUntil.IsZero() {
		w.del = append(w.del, fResultUntil)
	} else {
		w.set = append(w.set, fResultUntil, msArg(req.ResultUntil))
	}
	return w, nil
}

// earliest is the earlier of two times, a zero time counting as never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Fail moves a leased record to FAILED, keeping the token.
func (s *Store) Fail(ctx context.Context, req idemstore.FailRequest) error {
	return s.finish(ctx, "fail", req.Lease, req.Now, write{
		target:    idemstore.StatusFailed,
		set:       []any{fLastError, truncate(req.Error, s.errLimit)},
		del:       []any{fDLReason, fDLSourceID}, // no dead-lettering pending
		expiresAt: req.ExpiresAt,
	})
}

// DeadLetter moves a leased record to DEAD_LETTERED with its reason. With
// req.Pending it records the reason, error and source message ID under the
// caller's token and leaves the record IN_PROGRESS, its lease, expiry and
// dead-letter copy's ID as they were; see [idemstore.Store].
func (s *Store) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	if req.Pending {
		return s.finish(ctx, "dead-letter", req.Lease, req.Now, write{
			target: idemstore.StatusInProgress,
			set: []any{
				fDLReason, string(req.Reason),
				fLastError, truncate(req.Error, s.errLimit),
				fDLSourceID, req.MessageID,
			},
			keep: true,
		})
	}
	return s.finish(ctx, "dead-letter", req.Lease, req.Now, write{
		target: idemstore.StatusDeadLettered,
		set: []any{
			fDLReason, string(req.Reason),
			fLastError, truncate(req.Error, s.errLimit),
			fDLSourceID, req.MessageID,
			fDLCopyID, req.DeadLetterMessageID,
		},
		expiresAt: req.ExpiresAt,
	})
}

// Extend moves the end of a lease the caller still holds, and with
// req.ExpiresAt the record's expiry, its key's PEXPIREAT and its score in
// the open set.
func (s *Store) Extend(ctx context.Context, req idemstore.ExtendRequest) error {
	return s.finish(ctx, "extend", req.Lease, req.Now, write{
		target:    idemstore.StatusInProgress,
		set:       []any{fLeaseUntil, msArg(req.LeaseUntil)},
		expiresAt: req.ExpiresAt,
		keep:      req.ExpiresAt.IsZero(),
	})
}

// Get reads a record with one HGETALL. An absent or expired record yields
// idemstore.ErrNotFound. A COMPLETED record whose unexpired result is
// kept apart is read again with its result in one MULTI (HGETALL and
// HMGET): one more round trip, and the two always from the same moment.
func (s *Store) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	k, err := s.keysOf("get", req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	h, err := s.client.HGetAll(ctx, k.record).Result()
	if err != nil {
		return idemstore.Record{}, unavailable("get", k.record, err)
	}
	var apart []any // the result hash, once read with the record
	for {
		if len(h) == 0 || expiredAt(h, req.Now) {
			return idemstore.Record{}, fmt.Errorf("%w: %q", idemstore.ErrNotFound, k.record)
		}
		rec := decode(req.Namespace, req.Key, h)
		switch {
		case !resultApart(h, rec, req.Now):
			return rec, nil
		case apart != nil:
			if rec, err = withApart(rec, apart[0], apart[1]); err != nil {
				return idemstore.Record{}, unavailable("get", k.record, err)
			}
			return rec, nil
		}
		var hc *redis.MapStringStringCmd
		var rc *redis.SliceCmd
		if _, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			hc = p.HGetAll(ctx, k.record)
			rc = p.HMGet(ctx, k.result, "t", "r")
			return nil
		}); err != nil {
			return idemstore.Record{}, unavailable("get", k.record, err)
		}
		h, apart = hc.Val(), rc.Val()
	}
}

// resultApart reports whether a record's hash says its result is kept
// apart and may still be replayed at now.
func resultApart(h map[string]string, rec idemstore.Record, now time.Time) bool {
	_, apart := h[fResultApart]
	return apart && rec.Status == idemstore.StatusCompleted && !rec.ResultExpired(now)
}

// Delete removes a record and its open-set entries in one script call.
func (s *Store) Delete(ctx context.Context, req idemstore.DeleteRequest) error {
	k, err := s.keysOf("delete", req.Namespace, req.Key)
	if err != nil {
		return err
	}
	if err := deleteScript.Run(ctx, s.client, k.all(), k.member).Err(); err != nil {
		return unavailable("delete", k.record, err)
	}
	return nil
}

// LoadScripts loads the store's scripts into the server's script cache
// (SCRIPT LOAD), so that the first call of each is one EVALSHA rather than
// a NOSCRIPT refusal followed by an EVAL. Calling it is optional: a
// function may call it at cold start. On a cluster it loads them on every
// primary.
func (s *Store) LoadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range allScripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return unavailable("load scripts", s.prefix, err)
			}
		}
		return nil
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.client)
}
