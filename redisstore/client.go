package redisstore

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Timeouts NewClient gives a client whose URL sets none: short enough that
// an unreachable cache fails a message's store calls (SQS keeps the
// message) instead of spending the invocation.
const (
	DefaultDialTimeout = time.Second
	DefaultIOTimeout   = 500 * time.Millisecond
)

// NewClient returns a client for the Redis server or cluster rawURL names:
//
//	redis://[user:password@]host:port[/db]       one endpoint, plain TCP
//	rediss://[user:password@]host:port[/db]      one endpoint, TLS
//	redis+cluster://host:port[?addr=host2:port]  cluster mode, plain TCP
//	rediss+cluster://host:port[?addr=...]        cluster mode, TLS (ElastiCache Serverless, MemoryDB)
//
// with go-redis's URL query options (dial_timeout, read_timeout,
// write_timeout, pool_size, ...); where the URL sets no timeout, the client
// dials within DefaultDialTimeout and reads and writes within
// DefaultIOTimeout. TLS is at least version 1.2. A URL of another form is
// refused with an error wrapping idemstore.ErrInvalidOption.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	base, cluster := strings.CutSuffix(scheme, "+cluster")
	if !ok || base != "redis" && base != "rediss" {
		return nil, fmt.Errorf("%w: redis URL %q: want redis://, rediss://, redis+cluster:// or rediss+cluster://", idemstore.ErrInvalidOption, redact(rawURL))
	}
	u := base + "://" + rest
	query := ""
	if p, err := url.Parse(u); err == nil {
		query = p.RawQuery
	}
	timeouts := func(dial, read, write *time.Duration, cfg **tls.Config) {
		if !strings.Contains(query, "dial_timeout=") {
			*dial = DefaultDialTimeout
		}
		if !strings.Contains(query, "read_timeout=") {
			*read = DefaultIOTimeout
		}
		if !strings.Contains(query, "write_timeout=") {
			*write = DefaultIOTimeout
		}
		if *cfg != nil && (*cfg).MinVersion < tls.VersionTLS12 {
			(*cfg).MinVersion = tls.VersionTLS12
		}
	}
	if cluster {
		o, err := redis.ParseClusterURL(u)
		if err != nil {
			return nil, fmt.Errorf("%w: redis URL %q: %v", idemstore.ErrInvalidOption, redact(rawURL), err)
		}
		timeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.TLSConfig)
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("%w: redis URL %q: %v", idemstore.ErrInvalidOption, redact(rawURL), err)
	}
	timeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.TLSConfig)
	return redis.NewClient(o), nil
}

// redact is rawURL without its password, for errors and logs.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		if i := strings.LastIndexByte(rawURL, '@'); i >= 0 {
			return "…@" + rawURL[i+1:]
		}
		return rawURL
	}
	return u.Redacted()
}
