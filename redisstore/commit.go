package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Committer = (*Store)(nil)

func init() { allScripts = append(allScripts, commitScript) }

// commitScript records the outcome of a run that held no lease (the
// optimistic mode): a claim's decision and a fenced write's changes in one
// step. It applies to exactly the records a claim may take: absent or
// expired (a fresh generation, whose generation is the commit's token),
// FAILED with the same payload hash, or IN_PROGRESS with the same hash
// whose lease ended more than the grace ago (takeovers rises).
//
//	ARGV: now ms, token, status, payload hash, message ID, grace ms,
//	      expires at ms ('' none), key expiry ms ('' none), schema
//	      version, member, max attempts (0 none), result apart ('set',
//	      'del'), the apart result's key expiry ms ('' none), the apart
//	      result, number of field pairs to set n, number of fields to
//	      delete d, n field/value pairs, d fields, then a completion's
//	      commands (see commands; 0 for none)
//
// KEYS beyond the record's five are those of the commands. The commands
// run, as the completion script runs them, only when the commit applies:
// a commit and its effects are one step.
//
// It returns {outcome, record as HGETALL}: 'committed'; 'own' (our token
// with our status already: a retry whose first reply was lost, whose
// commands applied with it and are not run again); 'limit' (a failure
// that would be attempt max attempts or later, nothing written; the
// record is empty when absent); 'refused' (with the record that refused
// it); or {'write-refused', record, index, reason} when a command refused
// the commit (nothing applied).
var commitScript = redis.NewScript(prelude + commands + `
local now = tonumber(ARGV[1])
local token, status, hash, member = ARGV[2], ARGV[3], ARGV[4], ARGV[10]
prune(now)

local r, flat = load()
local live = r ~= nil and not expired(r, now)
if live and r.t == token and r.s == status then return {'own', flat} end

local attempts, old, takeover = 0, nil, false
if not live then
  flat = {}
elseif r.h ~= hash then
  return {'refused', flat}
elseif r.s == 'FAILED' then
  attempts, old = num(r.a), 'FAILED'
elseif r.s == 'IN_PROGRESS' and (r.dr or '') == '' and num(r.lu) < now - num(ARGV[6]) then
  attempts, old, takeover = num(r.a), 'IN_PROGRESS', true
else
  return {'refused', flat}
end
local max = tonumber(ARGV[11])
if status == 'FAILED' and max > 0 and attempts + 1 >= max then return {'limit', flat} end
local n, d = tonumber(ARGV[15]), tonumber(ARGV[16])
local cmds = parse(17 + 2 * n + d)
local no = refusal(cmds)
if no ~= nil then return {'write-refused', flat, tostring(no[1]), no[2]} end
run(cmds)

-- The record as the commit leaves it, in one HSET right after the
-- commands: from then on a retry finds our token and status ('own') and
-- runs nothing again, whatever fails after. A fresh generation is written
-- over the expired record, whose other fields go after it, rather than
-- deleting the key and writing it again (see run).
local ea = ARGV[7]
local w = {s = status, t = token, lu = ARGV[1], h = hash, m = ARGV[5], ea = ea, ua = ARGV[1], ps = ''}
if live then
  w.a, w.c = num(r.a) + 1, num(r.c) + 1
  if takeover then w.to = num(r.to) + 1 end
else
  w.v, w.g, w.fa, w.a, w.to, w.c = ARGV[9], token, ARGV[1], 1, 0, 1
end
for i = 17, 15 + 2 * n, 2 do w[ARGV[i]] = ARGV[i + 1] end
local out = {}
for f, v in pairs(w) do
  out[#out + 1] = f
  out[#out + 1] = tostring(v)
end
redis.call('HSET', rec, unpack(out))
local gone = {}
for i = 17 + 2 * n, 16 + 2 * n + d do gone[#gone + 1] = ARGV[i] end
if not live and r ~= nil then
  for f in pairs(r) do
    if w[f] == nil then gone[#gone + 1] = f end
  end
end
if #gone > 0 then redis.call('HDEL', rec, unpack(gone)) end
if ARGV[12] == 'set' then apart(token, ARGV[14], ARGV[13]) else redis.call('DEL', res) end
retain(ARGV[8])
if not live and r ~= nil and sets[r.s] ~= nil and sets[r.s] ~= sets[status] then redis.call('ZREM', sets[r.s], member) end
index(member, old, status, ea)
return {'committed', redis.call('HGETALL', rec)}
`)

// Commit records the outcome of a run that held no lease, in one script
// call; see [idemstore.Committer]. A result larger than
// WithInlineResultBytes is kept apart by the same script. Extra
// Writes are Commands, checked and run as Complete runs them: in the same
// step as the commit, and only when it applies; a command that refuses
// the commit yields a *CommandError (idemstore.ErrWriteRefused) and
// nothing is recorded.
func (s *Store) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	if err := idemstore.CheckCommit(req); err != nil {
		return idemstore.CommitResult{}, fmt.Errorf("redisstore: %w", err)
	}
	k, err := s.keysOf("commit", req.Namespace, req.Key)
	if err != nil {
		return idemstore.CommitResult{}, err
	}
	cmds, err := s.commandsOf(k, req.Writes)
	if err != nil {
		return idemstore.CommitResult{}, fmt.Errorf("redisstore commit %q: %w", k.record, err)
	}
	if len(req.Result) > s.maxRes {
		return idemstore.CommitResult{}, fmt.Errorf("%w: redisstore commit %q: result of %d bytes, over the store's %d",
			idemstore.ErrResultTooLarge, k.record, len(req.Result), s.maxRes)
	}
	var set, del []any
	apart, apartUntil, apartResult := "del", "", []byte(nil)
	switch {
	case req.Status == idemstore.StatusFailed:
		set = append(set, fLastError, truncate(req.Error, s.errLimit))
		del = append(del, fResult, fResultApart, fResultUntil)
	case len(req.Result) > s.inline:
		set = append(set, fResultApart, len(req.Result))
		del = append(del, fResult)
		apart, apartUntil, apartResult = "set", s.keyExpiry(earliest(req.ResultUntil, req.ExpiresAt)), req.Result
	case len(req.Result) > 0:
		set = append(set, fResult, req.Result)
		del = append(del, fResultApart)
	default:
		del = append(del, fResult, fResultApart)
	}
	if req.Status == idemstore.StatusCompleted {
		if req.ResultUntil.IsZero() {
			del = append(del, fResultUntil)
		} else {
			set = append(set, fResultUntil, msArg(req.ResultUntil))
		}
	}
	args := make([]any, 0, 17+len(set)+len(del))
	args = append(args, strconv.FormatInt(ceilMillis(req.Now), 10), req.Token, string(req.Status), req.PayloadHash, req.MessageID,
		req.Grace.Milliseconds(), msArg(req.ExpiresAt), s.keyExpiry(req.ExpiresAt), idemstore.SchemaVersion, k.member,
		req.MaxAttempts, apart, apartUntil, apartResult, len(set)/2, len(del))
	args = append(args, set...)
	args = append(args, del...)
	scriptKeys, args := encodeCommands(cmds, k.all(), args)
	if err := s.checkRequest("commit", k.record, scriptKeys, args, len(cmds)); err != nil {
		return idemstore.CommitResult{}, err
	}
	v, err := commitScript.Run(ctx, s.client, scriptKeys, args...).Slice()
	if err != nil {
		return idemstore.CommitResult{}, unavailable("commit", k.record, err)
	}
	if len(v) != 2 && (len(v) != 4 || v[0] != "write-refused") {
		return idemstore.CommitResult{}, unavailable("commit", k.record, fmt.Errorf("unexpected reply of %d elements", len(v)))
	}
	h, err := fromFlat(v[1])
	if err != nil {
		return idemstore.CommitResult{}, unavailable("commit", k.record, err)
	}
	var rec idemstore.Record
	if len(h) > 0 {
		rec = decode(req.Namespace, req.Key, h)
	}
	switch v[0] {
	case "write-refused":
		i, _ := strconv.Atoi(fmt.Sprint(v[2]))
		if i < 1 || i > len(cmds) {
			return idemstore.CommitResult{}, unavailable("commit", k.record, fmt.Errorf("unexpected refusal %q", v))
		}
		c := cmds[i-1]
		return idemstore.CommitResult{}, fmt.Errorf("redisstore commit %q: %w", k.record, &CommandError{Index: i - 1, Op: c.Op, Key: c.Key, Reason: fmt.Sprint(v[3])})
	case "committed", "own":
		return idemstore.CommitResult{Committed: true, Record: rec}, nil
	case "limit":
		return idemstore.CommitResult{AtLimit: true, Record: rec}, nil
	default:
		return idemstore.CommitResult{Record: rec}, nil
	}
}
