package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Command is a completion write of the Redis store: one Redis command the
// completion's own script runs, in the same atomic step as the COMPLETED
// mark and fenced by the same lease token. Add it in the handler with
// lambdaidem.AddCompletionWrite, and declare it with
// lambdaidem.WithCompletionWrites[redisstore.Command]().
//
// Either all of a completion's commands apply, with the completion, or
// none does: nothing applies when the lease was lost (the record was taken
// over, expired or already has an outcome), when a Guard does not hold,
// or when a key holds a value the command cannot work on (a list where a
// hash is expected, a counter that is not an integer, a sum beyond
// ±2^53); the last two are reported as a *CommandError, which matches
// idemstore.ErrWriteRefused, as the DynamoDB store reports a transaction
// write whose condition failed. A completion re-sent after it applied (its
// reply lost) is recognised by its token and applies nothing again.
//
// The script checks everything Redis could refuse before its first write,
// so it never stops half-way:
//
//   - what a command's arguments must be (their number, integers, scores)
//     and where its keys are, when the handler adds it
//     (AddCompletionWrite returns ErrInvalidCommand or ErrCrossSlot);
//   - the length of the completion's request, when the handler adds it
//     too (ErrRequestTooLarge): at most WithMaxRequestArgs arguments,
//     3,999 by default, the most ElastiCache Serverless takes in one
//     request, with about 40 of them the record's own; and at most
//     MaxRequestBytes (512 MiB, the server's limit on one argument). A
//     server that takes longer requests may be given a higher limit; the
//     script sends a long command to Redis in parts of 1,000 arguments,
//     which these commands allow, so Lua's own limit (about 8,000 values
//     at once) never applies;
//   - the keys' types, the integers to add to and the guards, by the
//     script before any command runs;
//   - lack of memory: Redis refuses a script without flags (the store's)
//     for maxmemory only at a first write that may grow memory, never
//     after a write;
//   - a cluster slot in migration: Redis then refuses a script's command
//     on a key the script deleted, so no script touches a key again once
//     a command may have deleted it (a removal stops when its key is
//     empty, and an emptied key gets no expiry).
//
// A refusal for the data (a guard, a type, an integer) is a *CommandError;
// anything else Redis answers with (a lost connection, lack of memory,
// a redirect while a slot migrates) comes before the first write and is
// idemstore.ErrStoreUnavailable, and the same completion may be sent
// again.
//
// Make commands with the constructors (Set, SetNX, IncrBy, HSet, HSetNX,
// HIncrBy, HDel, RPush, LPush, SAdd, SRem, ZAdd, Del) and add a guard
// with If. Every key a command writes or its guard reads must be in the
// record's cluster slot, as Redis Cluster (ElastiCache Serverless,
// MemoryDB) requires of one script: Store.Key names keys that are. A
// completion holds at most one command per key, and no command may touch
// the store's own keys.
type Command struct {
	// Op is the command: one of the Op constants.
	Op string
	// Key is the key the command writes.
	Key string
	// Args are the command's arguments after the key, as Redis takes them
	// (SET: the value; HSET: field, value, ...; INCRBY: the increment;
	// ZADD: score, member, ...).
	Args []string
	// Guard, when set, must hold before anything of the completion
	// applies.
	Guard *Guard
	// ExpiresAt, when set, is the key's expiry (PEXPIREAT) once the
	// command applied.
	ExpiresAt time.Time
}

// The commands a Command may run. Each writes one key.
const (
	OpSet     = "SET"     // Args: value. Any key: SET replaces it.
	OpDel     = "DEL"     // no Args.
	OpIncrBy  = "INCRBY"  // Args: an integer. A string holding an integer, or no key.
	OpHSet    = "HSET"    // Args: field, value, ... A hash, or no key.
	OpHIncrBy = "HINCRBY" // Args: field, an integer. A hash, or no key.
	OpHDel    = "HDEL"    // Args: fields. A hash, or no key.
	OpRPush   = "RPUSH"   // Args: values. A list, or no key.
	OpLPush   = "LPUSH"   // Args: values. A list, or no key.
	OpSAdd    = "SADD"    // Args: members. A set, or no key.
	OpSRem    = "SREM"    // Args: members. A set, or no key.
	OpZAdd    = "ZADD"    // Args: score, member, ... A sorted set, or no key.
)

// Guard is a condition a Command carries: it is read before any command
// of the completion applies, and when it does not hold the completion is
// refused with a *CommandError and nothing applies.
type Guard struct {
	// Key is the key read; empty means the command's key.
	Key string
	// Field is a field of that key's hash; empty reads the key itself
	// (whether it exists) or its string value.
	Field string
	// Test is what must hold: one of the Test constants.
	Test string
	// Value is the operand of TestEqual (a string) and of TestAtLeast and
	// TestAtMost (an integer; a missing key or field counts as 0).
	Value string
}

// The tests of a Guard.
const (
	TestExists  = "exists"  // the key (or field) exists
	TestAbsent  = "absent"  // the key (or field) does not exist
	TestEqual   = "eq"      // its value is Value
	TestAtLeast = "ge"      // its integer value is at least Value
	TestAtMost  = "le"      // its integer value is at most Value
	maxExact    = 1<<53 - 1 // integers the script compares and adds exactly
)

// Set sets key to value.
func Set(key, value string) Command { return Command{Op: OpSet, Key: key, Args: []string{value}} }

// SetNX sets key to value, and refuses the completion when key exists
// (as SET NX would not set it).
func SetNX(key, value string) Command {
	return Set(key, value).If(Guard{Test: TestAbsent})
}

// IncrBy adds n to the integer at key.
func IncrBy(key string, n int64) Command {
	return Command{Op: OpIncrBy, Key: key, Args: []string{strconv.FormatInt(n, 10)}}
}

// HSet sets fields of the hash at key: field, value, field, value...
func HSet(key string, fieldValues ...string) Command {
	return Command{Op: OpHSet, Key: key, Args: fieldValues}
}

// HSetNX sets one field of the hash at key, and refuses the completion
// when the field exists.
func HSetNX(key, field, value string) Command {
	return HSet(key, field, value).If(Guard{Field: field, Test: TestAbsent})
}

// HIncrBy adds n to the integer in a field of the hash at key.
func HIncrBy(key, field string, n int64) Command {
	return Command{Op: OpHIncrBy, Key: key, Args: []string{field, strconv.FormatInt(n, 10)}}
}

// HDel deletes fields of the hash at key.
func HDel(key string, fields ...string) Command { return Command{Op: OpHDel, Key: key, Args: fields} }

// RPush appends values to the list at key.
func RPush(key string, values ...string) Command { return Command{Op: OpRPush, Key: key, Args: values} }

// LPush prepends values to the list at key.
func LPush(key string, values ...string) Command { return Command{Op: OpLPush, Key: key, Args: values} }

// SAdd adds members to the set at key.
func SAdd(key string, members ...string) Command { return Command{Op: OpSAdd, Key: key, Args: members} }

// SRem removes members from the set at key.
func SRem(key string, members ...string) Command { return Command{Op: OpSRem, Key: key, Args: members} }

// ZAdd adds member with score to the sorted set at key.
func ZAdd(key string, score float64, member string) Command {
	return Command{Op: OpZAdd, Key: key, Args: []string{strconv.FormatFloat(score, 'g', -1, 64), member}}
}

// Del deletes key.
func Del(key string) Command { return Command{Op: OpDel, Key: key} }

// If returns the command with g as its guard.
func (c Command) If(g Guard) Command {
	c.Guard = &g
	return c
}

// ExpireAt returns the command with the key expiring at t once it applied.
func (c Command) ExpireAt(t time.Time) Command {
	c.ExpiresAt = t
	return c
}

// Named errors of completion writes.
var (
	// ErrInvalidCommand: a Command the store could never run: an unknown
	// Op, arguments the command does not take, a guard with an unknown
	// test, two commands on one key in one completion, a key of the
	// store's own, or commands that make the completion's request too long
	// (ErrRequestTooLarge, which matches it). Nothing of the completion
	// was written.
	ErrInvalidCommand = errors.New("redisstore: invalid completion command")
	// ErrCrossSlot: a key of a Command is not in the record's cluster
	// slot, so one script cannot touch both (Redis Cluster refuses it
	// with CROSSSLOT). Make such keys with Store.Key. Nothing of the
	// completion was written.
	ErrCrossSlot = errors.New("redisstore: completion command key outside the record's slot")
)

// CommandError reports the command of a completion that refused it:
// its guard did not hold, or its key held a value the command cannot work
// on. Nothing of the completion was written; it matches
// idemstore.ErrWriteRefused.
type CommandError struct {
	// Index is the command's position among the completion's writes.
	Index int
	// Op and Key are the command's.
	Op, Key string
	// Reason says what refused it: "guard" (the guard did not hold),
	// "type" (the key holds another kind of value) or "integer" (a value
	// to add to is not an integer, or the sum is beyond what the script
	// adds exactly, ±2^53).
	Reason string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("redisstore: completion command %d (%s %s) refused: %s", e.Index, e.Op, e.Key, e.Reason)
}

// Unwrap returns idemstore.ErrWriteRefused.
func (e *CommandError) Unwrap() error { return idemstore.ErrWriteRefused }

// Key returns a key named name in namespace's cluster slot, the slot of
// every record of the namespace, for the commands of its completions:
// PREFIX:{NAMESPACE}:x:NAME.
func (s *Store) Key(namespace, name string) string { return s.tag(namespace) + "x:" + name }

// opArgs says, per Op, what its arguments must be.
var opArgs = map[string]func(args []string) error{
	OpSet:     exactly(1),
	OpDel:     exactly(0),
	OpIncrBy:  func(a []string) error { return all(exactly(1), integers(0))(a) },
	OpHSet:    pairs(nil),
	OpHIncrBy: func(a []string) error { return all(exactly(2), integers(1))(a) },
	OpHDel:    atLeast(1),
	OpRPush:   atLeast(1),
	OpLPush:   atLeast(1),
	OpSAdd:    atLeast(1),
	OpSRem:    atLeast(1),
	OpZAdd:    pairs(floats),
}

func exactly(n int) func([]string) error {
	return func(a []string) error {
		if len(a) != n {
			return fmt.Errorf("takes %d arguments, has %d", n, len(a))
		}
		return nil
	}
}

func atLeast(n int) func([]string) error {
	return func(a []string) error {
		if len(a) < n {
			return fmt.Errorf("takes at least %d arguments, has %d", n, len(a))
		}
		return nil
	}
}

// pairs takes pairs of arguments; check, when set, checks each pair's
// first.
func pairs(check func(string) error) func([]string) error {
	return func(a []string) error {
		if len(a) == 0 || len(a)%2 != 0 {
			return fmt.Errorf("takes pairs of arguments, has %d", len(a))
		}
		for i := 0; check != nil && i < len(a); i += 2 {
			if err := check(a[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// floats checks a score: a finite number written as Go writes it
// (strconv.FormatFloat with 'g'), which Redis reads the same.
func floats(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strconv.FormatFloat(f, 'g', -1, 64) != s {
		return fmt.Errorf("%q is not a finite score written as strconv.FormatFloat(f, 'g', -1, 64) writes it", s)
	}
	return nil
}

// integers checks that argument i is an integer the script adds exactly.
func integers(i int) func([]string) error {
	return func(a []string) error { return exactInt(a[i]) }
}

// exactInt checks an integer as Redis reads one (no sign but '-', no
// leading zero), within ±2^53.
func exactInt(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxExact || n < -maxExact || strconv.FormatInt(n, 10) != s {
		return fmt.Errorf("%q is not an integer within ±2^53 written as strconv.FormatInt writes it", s)
	}
	return nil
}

func all(checks ...func([]string) error) func([]string) error {
	return func(a []string) error {
		for _, c := range checks {
			if err := c(a); err != nil {
				return err
			}
		}
		return nil
	}
}

// commandsOf takes the store's commands out of a completion's writes,
// checked for the record whose keys are k: each must be a Command (or a
// non-nil *Command), well formed, with every key in the record's slot,
// one command per key, none of the store's own keys.
func (s *Store) commandsOf(k keys, writes []any) ([]Command, error) {
	cmds := make([]Command, 0, len(writes))
	seen := make(map[string]int, len(writes))
	slot := Slot(k.record)
	for i, w := range writes {
		var c Command
		switch w := w.(type) {
		case Command:
			c = w
		case *Command:
			if w == nil {
				return nil, fmt.Errorf("%w: write %d is a nil *redisstore.Command", ErrInvalidCommand, i)
			}
			c = *w
		default:
			return nil, fmt.Errorf("%w: write %d is a %T; the Redis store commits redisstore.Command values", idemstore.ErrUnsupportedWrite, i, w)
		}
		if err := s.checkCommand(k, slot, c); err != nil {
			return nil, fmt.Errorf("write %d (%s %s): %w", i, c.Op, c.Key, err)
		}
		if j, ok := seen[c.Key]; ok {
			return nil, fmt.Errorf("%w: writes %d and %d both write %q (one command per key)", ErrInvalidCommand, j, i, c.Key)
		}
		seen[c.Key] = i
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// checkCommand checks one command for the record whose keys are k, in
// cluster slot slot.
func (s *Store) checkCommand(k keys, slot int, c Command) error {
	check, ok := opArgs[c.Op]
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown Op %q", ErrInvalidCommand, c.Op)
	case c.Key == "":
		return fmt.Errorf("%w: no key", ErrInvalidCommand)
	}
	if err := check(c.Args); err != nil {
		return fmt.Errorf("%w: %s %v", ErrInvalidCommand, c.Op, err)
	}
	if err := s.checkKey(k, slot, c.Key); err != nil {
		return err
	}
	if g := c.Guard; g != nil {
		switch g.Test {
		case TestExists, TestAbsent, TestEqual:
		case TestAtLeast, TestAtMost:
			if err := exactInt(g.Value); err != nil {
				return fmt.Errorf("%w: guard %s: %v", ErrInvalidCommand, g.Test, err)
			}
		default:
			return fmt.Errorf("%w: guard test %q", ErrInvalidCommand, g.Test)
		}
		if g.Key != "" {
			if err := s.checkKey(k, slot, g.Key); err != nil {
				return fmt.Errorf("guard: %w", err)
			}
		}
	}
	return nil
}

// checkKey refuses a key outside the record's slot, and the store's own
// keys.
func (s *Store) checkKey(k keys, slot int, key string) error {
	if Slot(key) != slot {
		return fmt.Errorf("%w: %q is in slot %d, the record %q in slot %d", ErrCrossSlot, key, Slot(key), k.record, slot)
	}
	tag := strings.TrimSuffix(k.record, "r:"+k.member)
	for _, own := range []string{tag + "r:", tag + "open:", tag + "res:"} {
		if strings.HasPrefix(key, own) {
			return fmt.Errorf("%w: %q is one of the store's own keys", ErrInvalidCommand, key)
		}
	}
	return nil
}

// checkWrite is the store's check of a completion write as the handler
// adds it (idemstore.Capabilities.CheckWrite).
func (s *Store) checkWrite(lease idemstore.Lease, writes []any) error {
	k, err := s.keysOf("complete", lease.Namespace, lease.Key)
	if err != nil {
		return err
	}
	cmds, err := s.commandsOf(k, writes)
	if err != nil {
		return err
	}
	return s.checkCommandsSize(k, cmds)
}

// encode appends the commands to a script's KEYS and ARGV: per command
// its Op, the index of its key in KEYS, the number of its Args and the
// Args, its expiry (” none), then its guard: test (” none), the index
// of the key it reads, the field and the operand.
func encodeCommands(cmds []Command, keys []string, argv []any) ([]string, []any) {
	index := make(map[string]int, len(keys)+len(cmds))
	for i, k := range keys {
		index[k] = i + 1
	}
	keyIndex := func(k string) int {
		if i, ok := index[k]; ok {
			return i
		}
		keys = append(keys, k)
		index[k] = len(keys)
		return len(keys)
	}
	argv = append(argv, len(cmds))
	for _, c := range cmds {
		argv = append(argv, c.Op, keyIndex(c.Key), len(c.Args))
		for _, a := range c.Args {
			argv = append(argv, a)
		}
		argv = append(argv, msArg(c.ExpiresAt))
		if g := c.Guard; g != nil {
			gk := g.Key
			if gk == "" {
				gk = c.Key
			}
			argv = append(argv, g.Test, keyIndex(gk), g.Field, g.Value)
		} else {
			argv = append(argv, "", 0, "", "")
		}
	}
	return keys, argv
}

// Slot is the Redis Cluster hash slot of key: CRC16 of its hash tag (the
// part between the first '{' and the next '}', when not empty) or of the
// whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the hash Redis
// Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
