package redisstore

import (
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// MaxRequestBytes is the most bytes the arguments of one request to the
// server hold together: 512 MiB, the server's limit on one argument
// (proto-max-bulk-len; a longer one is a protocol error, and the server
// closes the connection) and half its limit on a client's query buffer
// (client-query-buffer-limit, 1 GiB). A completion whose commands would
// make a longer request is refused with ErrRequestTooLarge.
const MaxRequestBytes = 512 << 20

const (
	// minRequestArgs is the least WithMaxRequestArgs takes: room for the
	// store's own calls, a few commands and a batch of two.
	minRequestArgs = 64
	// ownRequestArgs bounds the arguments of a completion's request that
	// are not its commands': EVALSHA, the script's SHA and the number of
	// keys (3), the record's five keys, at most 24 of the commit script's
	// own arguments, and 3 more when it is an item of a batch.
	ownRequestArgs = 40
)

// ErrRequestTooLarge: a completion's commands would make its request to
// the server longer than the store sends one: more arguments than
// WithMaxRequestArgs (DefaultMaxRequestArgs, 3,999, by default) or more
// bytes than MaxRequestBytes. The server would refuse the request, whole,
// on every try, so AddCompletionWrite refuses the command that makes it
// too long, and Complete, Commit and CompleteBatch refuse a completion
// holding it before anything is sent. It matches ErrInvalidCommand.
var ErrRequestTooLarge error = requestTooLarge("redisstore: completion request too large")

type requestTooLarge string

func (e requestTooLarge) Error() string { return string(e) }

// Is reports whether target is ErrInvalidCommand.
func (e requestTooLarge) Is(target error) bool { return target == ErrInvalidCommand }

// requestSize is the number of arguments and of bytes of a script call
// with keys and args: EVALSHA, the SHA and the number of keys included.
func requestSize(keys []string, args []any) (n, bytes int) {
	n, bytes = 3+len(keys)+len(args), len("EVALSHA")+40+10
	for _, k := range keys {
		bytes += len(k)
	}
	for _, a := range args {
		bytes += argBytes(a)
	}
	return n, bytes
}

// argBytes is the length of a script argument as the client sends it.
func argBytes(a any) int {
	switch a := a.(type) {
	case string:
		return len(a)
	case []byte:
		return len(a)
	default:
		return 20 // a number
	}
}

// checkCommandsSize refuses commands that would make a completion's
// request too long for the store's limits whatever else it carries (the
// check of AddCompletionWrite; the exact one comes before sending).
func (s *Store) checkCommandsSize(k keys, cmds []Command) error {
	own := k.all()
	scriptKeys, argv := encodeCommands(cmds, own, nil)
	n, bytes := requestSize(scriptKeys[len(own):], argv)
	n += ownRequestArgs - 3
	if n > s.maxArgs {
		return fmt.Errorf("%w: %d commands take %d arguments with the record's own, over the store's %d (WithMaxRequestArgs)",
			ErrRequestTooLarge, len(cmds), n, s.maxArgs)
	}
	for _, key := range own {
		bytes += len(key)
	}
	if bytes > s.maxBytes {
		return fmt.Errorf("%w: %d commands take %d bytes, over the store's %d (MaxRequestBytes)", ErrRequestTooLarge, len(cmds), bytes, s.maxBytes)
	}
	return nil
}

// checkRequest refuses a script call of a fenced write or a commit that
// the server would refuse for its length: ErrRequestTooLarge when it
// carries commands, else ErrResultTooLarge (its result, or error text, is
// what made it so long).
func (s *Store) checkRequest(op, record string, scriptKeys []string, args []any, cmds int) error {
	n, bytes := requestSize(scriptKeys, args)
	if n <= s.maxArgs && bytes <= s.maxBytes {
		return nil
	}
	named := ErrRequestTooLarge
	if cmds == 0 {
		named = idemstore.ErrResultTooLarge
	}
	return fmt.Errorf("%w: redisstore %s %q: a request of %d arguments and %d bytes, over the store's %d arguments (WithMaxRequestArgs) or %d bytes (MaxRequestBytes)",
		named, op, record, n, bytes, s.maxArgs, s.maxBytes)
}
