package redisstore

import "github.com/redis/go-redis/v9"

// Every transition of a record is one of these scripts, run by the server
// as one atomic step (EVALSHA, falling back to EVAL when the server has
// not cached the script yet). They take the caller's clock as an argument,
// like every lambdaidem store, so leases and expiry mean the same on every
// store whatever the server's clock says.
//
// KEYS of every script: the record's hash, then the open sets of
// IN_PROGRESS, FAILED and DEAD_LETTERED records of its namespace, then the
// hash that holds the record's result apart when it is large (see
// record.go); all five carry the same hash tag, so they live in one
// cluster slot. No script writes anything before it has decided to apply: a
// refused or failed script leaves the record as it was.

// prelude is shared by the scripts: reading the record, telling whether it
// expired, keeping the key's expiry and the open sets in step with it.
const prelude = `
local KEYS, ARGV = KEYS, ARGV
local rec, res, sets

-- bind points the script at one record: its keys and its arguments. A
-- script that serves a batch (see many) binds each record in turn.
local function bind(k, a)
  KEYS, ARGV = k, a
  rec, res = k[1], k[5]
  sets = {IN_PROGRESS = k[2], FAILED = k[3], DEAD_LETTERED = k[4]}
end
bind(KEYS, ARGV)

-- prune drops the members whose record expired before now from the
-- open sets, so they hold about as many members as there are open
-- records; a batch of one namespace prunes its sets once.
local pruned = {}
local function prune(now)
  for i = 2, 4 do
    local set = KEYS[i]
    if pruned[set] == nil or pruned[set] < now then
      redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. now)
      pruned[set] = now
    end
  end
end

-- load returns the record as a table and as the flat list HGETALL gave,
-- or nil when there is none.
local function load()
  local flat = redis.call('HGETALL', rec)
  if #flat == 0 then return nil, flat end
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return r, flat
end

-- head reads the fields a fenced write decides on (status, token,
-- expiry, lease end, generation, claim), or returns nil when there is no
-- record: every record has a status.
local headFields = {'s', 't', 'ea', 'lu', 'g', 'c'}
local function head()
  local v = redis.call('HMGET', rec, unpack(headFields))
  if not v[1] then return nil end
  local r = {}
  for i, f in ipairs(headFields) do
    if v[i] then r[f] = v[i] end
  end
  return r
end

-- num reads a stored number; an empty field (a zero time) is 0, long ago.
local function num(v)
  return tonumber(v) or 0
end

-- expired: the record counts as absent once its expires_at is before now,
-- whether or not the server has deleted the key yet.
local function expired(r, now)
  return r.ea ~= nil and r.ea ~= '' and num(r.ea) < now
end

-- retain sets the key's expiry: PEXPIREAT at the given ms, or none.
local function retain(at)
  if at == '' then redis.call('PERSIST', rec) else redis.call('PEXPIREAT', rec, at) end
end

-- index moves member from the open set of status old to that of new,
-- scored by its expiry (COMPLETED records are in none).
local function index(member, old, new, ea)
  if old ~= nil and old ~= new and sets[old] ~= nil then redis.call('ZREM', sets[old], member) end
  if sets[new] ~= nil then
    local score = ea
    if score == nil or score == '' then score = '+inf' end
    redis.call('ZADD', sets[new], score, member)
  end
end
`

// claimScript takes the lease.
//
//	ARGV: now ms, token, new generation, payload hash, message ID,
//	      lease until ms, grace ms, expires at ms ('' none), no takeover
//	      ('1'), key expiry ms ('' none), schema version, member
//
// It returns {outcome, previous status, record as HGETALL}: outcome is
// 'claimed', 'own' (our token is already there: a retry of a claim whose
// reply was lost) or 'refused' (with the record that refused it). A
// refusal that is a replay (COMPLETED, the same payload hash, the result
// not expired) of a record whose result is kept apart adds the token and
// the result the apart hash holds: {'refused', previous, record, token,
// result}, previous being empty.
// Any other refusal leaves a result kept apart out, so a conflicting or
// late duplicate gets a small reply.
//
// claimManyScript is the same step for a batch of keys (see many): one
// call claims them all, each answered as its own claim would be.
var claimScript, claimManyScript = redis.NewScript(one(prelude, claimStep)), redis.NewScript(many(prelude, claimStep))

const claimStep = `
local now = tonumber(ARGV[1])
local token, hash, ea, member = ARGV[2], ARGV[4], ARGV[8], ARGV[12]
prune(now)

local r, flat = load()
local live = r ~= nil and not expired(r, now)
if live and r.t == token then return {'own', r.ps or '', flat} end

local prev, old, n = '', nil, r
if not live then
  -- Absent or expired: a fresh generation, whatever was there before.
  -- The result of an earlier generation goes with it, even when the
  -- server has already deleted the record's key.
  redis.call('DEL', res)
  if r ~= nil then
    redis.call('DEL', rec)
    if sets[r.s] ~= nil then redis.call('ZREM', sets[r.s], member) end
  end
  n = {v = ARGV[11], g = ARGV[3], fa = ARGV[1], a = 0, to = 0, c = 0}
elseif r.s == 'COMPLETED' then
  if r.h == hash and r.rl ~= nil and (r.ru == nil or r.ru == '' or num(r.ru) >= now) then
    local apart = redis.call('HMGET', res, 't', 'r')
    return {'refused', '', flat, apart[1], apart[2]}
  end
  return {'refused', '', flat}
elseif r.h ~= hash then
  return {'refused', '', flat}
elseif r.s == 'FAILED' then
  prev, old = 'FAILED', 'FAILED'
elseif r.s == 'IN_PROGRESS' and ARGV[9] ~= '1' and num(r.lu) < now - num(ARGV[7]) then
  -- Takeover of an abandoned lease: the script holds the record still, so
  -- the old token it saw is the one it replaces.
  prev, old = 'IN_PROGRESS', 'IN_PROGRESS'
  n.to = num(n.to) + 1
else
  return {'refused', '', flat}
end

-- The record as the claim leaves it (what was there, or a fresh
-- generation, with the lease's fields), written in one HSET and returned
-- as written rather than read back.
n.a, n.c = num(n.a) + 1, num(n.c) + 1
n.s, n.t, n.lu, n.h, n.m, n.ea, n.ua, n.ps = 'IN_PROGRESS', token, ARGV[6], hash, ARGV[5], ea, ARGV[1], prev
local out = {}
for f, v in pairs(n) do
  out[#out + 1] = f
  out[#out + 1] = tostring(v)
end
redis.call('HSET', rec, unpack(out))
retain(ARGV[10])
index(member, old, 'IN_PROGRESS', ea)
return {'claimed', prev, out}
`

// one is a script that runs step, the body of a function that may use
// the functions lib defines, once: for the record and arguments the
// script was called with.
func one(lib, step string) string {
	return lib + "local function step()\n" + step + "\nend\nreturn step()\n"
}

// many is a script that runs step once per record of a batch, all in one
// atomic call: ARGV[1] is the number of records, followed by each
// record's number of keys, number of arguments and arguments; KEYS holds
// every record's keys in turn. It returns each record's reply, in order.
// A record whose step raised an error (a key of the wrong type) gets
// {'error', message} and the others stand; as with a single call, a step
// writes nothing before it has decided to apply.
func many(lib, step string) string {
	return lib + "local function step()\n" + step + "\nend\n" + `
local keys, args = KEYS, ARGV
local out, ki, ai = {}, 1, 2
for i = 1, tonumber(args[1]) do
  local nk, na = tonumber(args[ai]), tonumber(args[ai + 1])
  -- Copied one by one: unpack takes only so many values, and a record's
  -- arguments hold its commands'.
  local k, a = {}, {}
  for j = 1, nk do k[j] = keys[ki + j - 1] end
  for j = 1, na do a[j] = args[ai + 1 + j] end
  bind(k, a)
  ki, ai = ki + nk, ai + 2 + na
  local ok, reply = pcall(step)
  if not ok then
    if type(reply) == 'table' then reply = reply.err end
    reply = {'error', tostring(reply)}
  end
  out[i] = reply
end
return out
`
}

// commands runs a completion's commands (command.go): it parses them
// from ARGV, checks every guard, key type and integer before any of them
// runs, and runs them only when all may apply.
//
//	ARGV from at: the number of commands, then per command: op, the
//	      index of its key in KEYS, the number of its arguments and the
//	      arguments, its expiry ms ('' none), its guard's test ('' none),
//	      the index of the key the guard reads, the field ('' the key
//	      itself) and the operand
const commands = `
local want = {SET = '*', DEL = '*', INCRBY = 'string', HSET = 'hash', HINCRBY = 'hash', HDEL = 'hash',
  RPUSH = 'list', LPUSH = 'list', SADD = 'set', SREM = 'set', ZADD = 'zset'}
local exact = 9007199254740991

local function parse(at)
  local cmds = {}
  for i = 1, tonumber(ARGV[at]) do
    local c = {op = ARGV[at + 1], key = KEYS[tonumber(ARGV[at + 2])], args = {}}
    local n = tonumber(ARGV[at + 3])
    for j = 1, n do c.args[j] = ARGV[at + 3 + j] end
    at = at + 4 + n
    c.ea, c.test, c.gkey, c.gfield, c.gval = ARGV[at], ARGV[at + 1], KEYS[tonumber(ARGV[at + 2])], ARGV[at + 3], ARGV[at + 4]
    at = at + 4 -- the last of this command: the next starts at at + 1
    cmds[i] = c
  end
  return cmds
end

-- int reads an integer the script adds exactly, written as Redis reads
-- one; a missing value is 0, anything else nil.
local function int(v)
  if not v then return 0 end
  if v ~= '0' and not string.match(v, '^%-?[1-9]%d*$') then return nil end
  local n = tonumber(v)
  if n == nil or n > exact or n < -exact then return nil end
  return n
end

local function kind(key) return redis.call('TYPE', key).ok end

-- holds reports whether a command's guard holds.
local function holds(c)
  if c.test == '' then return true end
  local t, present, v = kind(c.gkey), false, false
  if c.gfield ~= '' then
    if t ~= 'hash' and t ~= 'none' then return false end
    v = redis.call('HGET', c.gkey, c.gfield)
    present = v ~= false
  else
    present = t ~= 'none'
    if t == 'string' then v = redis.call('GET', c.gkey) end
    if present and t ~= 'string' and c.test ~= 'exists' and c.test ~= 'absent' then return false end
  end
  if c.test == 'exists' then return present end
  if c.test == 'absent' then return not present end
  if c.test == 'eq' then return v ~= false and v == c.gval end
  local n = int(v)
  if n == nil then return false end
  if c.test == 'ge' then return n >= tonumber(c.gval) end
  return n <= tonumber(c.gval)
end

-- refusal returns {index, reason} for the first command that cannot
-- apply, or nil. It reads, for a command that removes, how many members
-- its key holds (c.left), so run knows when the key is gone.
local function refusal(cmds)
  for i, c in ipairs(cmds) do
    if not holds(c) then return {i, 'guard'} end
    local t = kind(c.key)
    if want[c.op] ~= '*' and t ~= 'none' and t ~= want[c.op] then return {i, 'type'} end
    if c.op == 'SREM' then c.left = redis.call('SCARD', c.key) end
    if c.op == 'HDEL' then c.left = redis.call('HLEN', c.key) end
    local cur
    if c.op == 'INCRBY' then cur = redis.call('GET', c.key) end
    if c.op == 'HINCRBY' then cur = redis.call('HGET', c.key, c.args[1]) end
    if cur ~= nil then
      local n, by = int(cur), int(c.args[#c.args])
      if n == nil or by == nil or math.abs(n + by) > exact then return {i, 'integer'} end
    end
  end
  return nil
end

-- run runs the commands. A command's arguments go to Redis in calls of
-- at most chunk arguments (an even number, so pairs stay whole): unpack
-- takes only so many values at once, and a command that failed there,
-- after the commands before it ran, would leave half a completion. Every
-- command run here is one that gives the same result in parts.
--
-- No key is touched again once a command may have deleted it (a removal
-- that took its last member, DEL): while its cluster slot migrates, Redis
-- answers a script that touches a key it deleted with an error, after the
-- writes before it. A removal counts what it leaves (c.left, read by
-- refusal) and stops when nothing is left; a gone key gets no expiry.
local chunk = 1000
local function run(cmds)
  for _, c in ipairs(cmds) do
    local left = c.left
    for i = 1, math.max(#c.args, 1), chunk do
      if left == 0 then break end
      local n = redis.call(c.op, c.key, unpack(c.args, i, math.min(i + chunk - 1, #c.args)))
      if left ~= nil then left = left - n end
    end
    if c.op == 'DEL' then left = 0 end
    if c.ea ~= '' and left ~= 0 then redis.call('PEXPIREAT', c.key, c.ea) end
  end
end

-- apart writes the result kept apart over whatever the hash held (only
-- these two fields), never deleting it first: see run. The completion's
-- token goes with the result, so a reader can tell it belongs to this
-- record.
local function apart(token, result, at)
  redis.call('HSET', res, 't', token, 'r', result)
  if at ~= '' then redis.call('PEXPIREAT', res, at) else redis.call('PERSIST', res) end
end
`

// finishScript is every write fenced by a lease token: complete, fail,
// dead-letter (final and pending), extend.
//
//	ARGV: now ms, token, target status, member, expires at ms ('' none,
//	      '-' keep), key expiry ms ('' none, '-' keep), result apart
//	      ('set', 'del' or '' to leave it), the apart result's key expiry
//	      ms ('' none), the apart result, number of field pairs to set n,
//	      number of fields to delete d, n field/value pairs, d fields, then
//	      the completion's commands (see commands; 0 for none)
//
// KEYS beyond the record's five are those of the commands.
//
// It returns {'ok'}; {'done'} when the record already has the target
// status under our token (a retry whose first reply was lost: its
// commands applied with it and are not run again); a refusal:
// {'gone'}, {'expired'}, {'taken', status, generation, claim},
// {'status', status}; or {'refused', index, reason} when a command
// refused the completion (nothing applied). A write whose target is
// IN_PROGRESS (extend, a pending dead-letter mark) applies again when
// re-sent, which changes nothing, and is refused once the record has left
// IN_PROGRESS. An extension (its first field pair sets 'lu') whose lease
// end is earlier than the record's changes nothing and returns {'ok'}.
//
// finishManyScript is the same step for a batch of records (see many).
var finishScript, finishManyScript = redis.NewScript(one(prelude+commands, finishStep)), redis.NewScript(many(prelude+commands, finishStep))

const finishStep = `
local now = tonumber(ARGV[1])
local token, target = ARGV[2], ARGV[3]
local r = head()
if r == nil then return {'gone'} end
if expired(r, now) then return {'expired'} end
if r.t ~= token then return {'taken', r.s, r.g, r.c} end
if r.s ~= 'IN_PROGRESS' then
  if r.s == target and target ~= 'IN_PROGRESS' then return {'done'} end
  return {'status', r.s}
end
-- An extension never moves the lease's end back: one held in the network
-- that lands after a later one changes nothing.
if target == 'IN_PROGRESS' and ARGV[12] == 'lu' and num(r.lu) > num(ARGV[13]) then return {'ok'} end

local n, d = tonumber(ARGV[10]), tonumber(ARGV[11])
local cmds = parse(12 + 2 * n + d)
local no = refusal(cmds)
if no ~= nil then return {'refused', tostring(no[1]), no[2]} end
run(cmds)
if n > 0 then redis.call('HSET', rec, unpack(ARGV, 12, 11 + 2 * n)) end
if d > 0 then redis.call('HDEL', rec, unpack(ARGV, 12 + 2 * n, 11 + 2 * n + d)) end
if ARGV[7] == 'set' then
  apart(token, ARGV[9], ARGV[8])
elseif ARGV[7] == 'del' then
  redis.call('DEL', res)
end
local ea = r.ea
if ARGV[5] ~= '-' then
  ea = ARGV[5]
  redis.call('HSET', rec, 'ea', ea)
end
redis.call('HSET', rec, 's', target, 'ua', ARGV[1])
if ARGV[6] ~= '-' then retain(ARGV[6]) end
index(ARGV[4], 'IN_PROGRESS', target, ea)
return {'ok'}
`

// deleteScript removes a record and its open-set entries.
//
//	ARGV: member
var deleteScript = redis.NewScript(prelude + `
redis.call('DEL', rec, res)
for i = 2, 4 do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
`)

// releaseScript ends the lease of an IN_PROGRESS record carrying the token
// the operator read: a lease that ended before the threshold (now less the
// grace) moves to FAILED under a new token; a live one, when forced, is
// revoked (a new token, nothing else changes).
//
//	ARGV: now ms, token read, new token, force ('1'), note, member,
//	      threshold ms
//
// It returns {outcome, record as HGETALL}: 'released', 'revoked', 'own'
// (the new token is already there: a retry), 'gone' or 'refused' (with the
// record that refused it).
var releaseScript = redis.NewScript(prelude + `
local now = tonumber(ARGV[1])
local r, flat = load()
if r == nil or expired(r, now) then return {'gone', {}} end
if r.t == ARGV[3] then return {'own', flat} end
if r.t ~= ARGV[2] or r.s ~= 'IN_PROGRESS' then return {'refused', flat} end
if num(r.lu) >= tonumber(ARGV[7]) then
  if ARGV[4] ~= '1' then return {'refused', flat} end
  redis.call('HSET', rec, 't', ARGV[3], 'e', ARGV[5], 'ua', ARGV[1])
  return {'revoked', redis.call('HGETALL', rec)}
end
redis.call('HSET', rec, 's', 'FAILED', 't', ARGV[3], 'e', ARGV[5], 'ua', ARGV[1])
redis.call('HDEL', rec, 'dr', 'ds') -- a FAILED record has no dead-lettering pending
index(ARGV[6], 'IN_PROGRESS', 'FAILED', r.ea)
return {'released', redis.call('HGETALL', rec)}
`)

// forgetScript deletes a record, unless it is DEAD_LETTERED (without
// abandon) or IN_PROGRESS under a live lease (lease until at or after the
// threshold). A live lease, when forced, is revoked instead: a new token,
// and the record expires at the lease's end plus the grace, which becomes
// its lease's end too (so no takeover comes before the expiry).
//
//	ARGV: now ms, force ('1'), member, abandon ('1'), threshold ms,
//	      grace ms, new token, note, key expiry slack ms
//
// It returns {outcome, record as HGETALL}: 'deleted' (the record as it
// was), 'revoked', 'own' (the new token is already there: a retry), 'gone'
// (absent or expired; an expired one is deleted all the same) or
// 'refused' (with the record that refused it).
var forgetScript = redis.NewScript(prelude + `
local now = tonumber(ARGV[1])
local r, flat = load()
if r ~= nil and not expired(r, now) then
  if r.t == ARGV[7] then return {'own', flat} end
  if r.s == 'DEAD_LETTERED' and ARGV[4] ~= '1' then return {'refused', flat} end
  if r.s == 'IN_PROGRESS' and num(r.lu) >= tonumber(ARGV[5]) then
    if ARGV[2] ~= '1' then return {'refused', flat} end
    local ends = num(r.lu) + tonumber(ARGV[6])
    local ea = string.format('%.0f', ends)
    redis.call('HSET', rec, 't', ARGV[7], 'e', ARGV[8], 'ua', ARGV[1], 'ea', ea, 'lu', ea)
    redis.call('PEXPIREAT', rec, string.format('%.0f', ends + tonumber(ARGV[9])))
    index(ARGV[3], 'IN_PROGRESS', 'IN_PROGRESS', ea)
    return {'revoked', redis.call('HGETALL', rec)}
  end
end
redis.call('DEL', rec, res)
for i = 2, 4 do redis.call('ZREM', KEYS[i], ARGV[3]) end
if r == nil or expired(r, now) then return {'gone', {}} end
return {'deleted', flat}
`)

// resetScript undoes a dead-letter mark for a redrive: it applies only to
// an unexpired DEAD_LETTERED record whose dead-letter copy is the one
// being redriven, that no operator abandoned, below the redrive limit,
// and leaves it FAILED with
// attempts 0, one more redrive and a new token (which fences off every
// older lease). The expiry stays.
//
//	ARGV: now ms, the copy's message ID, new token, max redrives (0 no
//	      limit), note, member
//
// It returns {outcome, record as HGETALL}: 'reset', 'own' (the new token
// is already there: a retry whose reply was lost), 'gone' (absent or
// expired) or 'refused' (with the record that refused it).
var resetScript = redis.NewScript(prelude + `
local now = tonumber(ARGV[1])
local r, flat = load()
if r == nil or expired(r, now) then return {'gone', {}} end
if r.t == ARGV[3] then return {'own', flat} end
local limit = tonumber(ARGV[4])
if r.s ~= 'DEAD_LETTERED' or r.dc ~= ARGV[2] or r.rv == 'abandoned' or (limit > 0 and num(r.rd) >= limit) then
  return {'refused', flat}
end
redis.call('HSET', rec, 's', 'FAILED', 't', ARGV[3], 'a', 0, 'rf', ARGV[2], 'e', ARGV[5], 'ua', ARGV[1])
redis.call('HINCRBY', rec, 'rd', 1)
redis.call('HDEL', rec, 'dr', 'ds', 'dc')
index(ARGV[6], 'DEAD_LETTERED', 'FAILED', r.ea)
return {'reset', redis.call('HGETALL', rec)}
`)

// resolveScript records an operator's decision on an unknown outcome: it
// applies only to an unexpired record DEAD_LETTERED as outcome_unknown,
// not abandoned, carrying the token and dead-letter copy the operator
// read. Every decision writes a new token, the decision and its note;
// applied makes the record COMPLETED with the given result (out of the
// open sets), not_applied resets it as resetScript does, abandoned
// changes nothing else.
//
//	ARGV: now ms, token read, copy ID read ('' none), new token,
//	      decision, note, result ('' none), member, last error
//
// It returns {outcome, record as HGETALL}: 'resolved', 'own' (the new
// token is already there: a retry whose reply was lost), 'gone' (absent
// or expired) or 'refused' (with the record that refused it).
var resolveScript = redis.NewScript(prelude + `
local now = tonumber(ARGV[1])
local r, flat = load()
if r == nil or expired(r, now) then return {'gone', {}} end
if r.t == ARGV[4] then return {'own', flat} end
if r.t ~= ARGV[2] or r.s ~= 'DEAD_LETTERED' or r.dr ~= 'outcome_unknown' or r.rv == 'abandoned' or (r.dc or '') ~= ARGV[3] then
  return {'refused', flat}
end
local d = ARGV[5]
redis.call('HSET', rec, 't', ARGV[4], 'rv', d, 'rn', ARGV[6], 'ua', ARGV[1])
if d == 'applied' then
  redis.call('HSET', rec, 's', 'COMPLETED')
  if ARGV[7] ~= '' then redis.call('HSET', rec, 'r', ARGV[7]) else redis.call('HDEL', rec, 'r') end
  redis.call('HDEL', rec, 'ru', 'rl', 'dr', 'ds', 'dc')
  redis.call('DEL', res)
  index(ARGV[8], 'DEAD_LETTERED', 'COMPLETED', r.ea)
elseif d == 'not_applied' then
  redis.call('HSET', rec, 's', 'FAILED', 'a', 0, 'e', ARGV[9])
  if ARGV[3] ~= '' then redis.call('HSET', rec, 'rf', ARGV[3]) else redis.call('HDEL', rec, 'rf') end
  redis.call('HINCRBY', rec, 'rd', 1)
  redis.call('HDEL', rec, 'dr', 'ds', 'dc')
  index(ARGV[8], 'DEAD_LETTERED', 'FAILED', r.ea)
end
return {'resolved', redis.call('HGETALL', rec)}
`)

var allScripts = []*redis.Script{claimScript, claimManyScript, finishScript, finishManyScript, deleteScript, releaseScript, forgetScript, resetScript, resolveScript}
