package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// NewClient reads the four URL forms, gives a URL without timeouts the
// short ones, keeps the URL's own, and asks TLS 1.2 or later of rediss.
func TestNewClientForms(t *testing.T) {
	for _, c := range []struct {
		url     string
		cluster bool
		tls     bool
		read    time.Duration
	}{
		{"redis://127.0.0.1:6379/2", false, false, redisstore.DefaultIOTimeout},
		{"rediss://user:secret@cache.example:6379", false, true, redisstore.DefaultIOTimeout},
		{"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", true, false, redisstore.DefaultIOTimeout},
		{"rediss+cluster://cache.example:6379?read_timeout=3s", true, true, 3 * time.Second},
	} {
		client, err := redisstore.NewClient(c.url)
		if err != nil {
			t.Fatalf("NewClient(%q): %v", c.url, err)
		}
		var read, dial time.Duration
		var tc *tls.Config
		switch cl := client.(type) {
		case *redis.ClusterClient:
			if !c.cluster {
				t.Errorf("NewClient(%q) is a cluster client", c.url)
			}
			read, dial, tc = cl.Options().ReadTimeout, cl.Options().DialTimeout, cl.Options().TLSConfig
		case *redis.Client:
			if c.cluster {
				t.Errorf("NewClient(%q) is not a cluster client", c.url)
			}
			read, dial, tc = cl.Options().ReadTimeout, cl.Options().DialTimeout, cl.Options().TLSConfig
		default:
			t.Fatalf("NewClient(%q) = %T", c.url, client)
		}
		if read != c.read || dial != redisstore.DefaultDialTimeout {
			t.Errorf("NewClient(%q): read timeout %s, dial %s; want %s, %s", c.url, read, dial, c.read, redisstore.DefaultDialTimeout)
		}
		if (tc != nil) != c.tls || tc != nil && tc.MinVersion < tls.VersionTLS12 {
			t.Errorf("NewClient(%q): TLS %+v, want TLS %v (1.2 or later)", c.url, tc, c.tls)
		}
		_ = client.Close()
	}
}

// A URL of another form is refused with ErrInvalidOption, and the error
// never shows its password.
func TestNewClientRefuses(t *testing.T) {
	for _, u := range []string{"", "cache.example:6379", "http://cache:6379", "redis+sentinel://x:1", "redis://user:hunter2@cache:6379/notadb"} {
		_, err := redisstore.NewClient(u)
		if !errors.Is(err, idemstore.ErrInvalidOption) {
			t.Errorf("NewClient(%q) = %v, want ErrInvalidOption", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NewClient(%q): the error shows the password: %v", u, err)
		}
	}
}

// Both forms reach the local redis-server (a cluster of one node), and a
// store on each keeps a record.
func TestNewClientReachesServer(t *testing.T) {
	a := addr(t)
	for _, u := range []string{"redis://" + a, "redis+cluster://" + a} {
		client, err := redisstore.NewClient(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		store := redisstore.New(client, "client-test")
		ctx := context.Background()
		now := time.Now()
		res, err := store.Claim(ctx, idemstore.ClaimRequest{Namespace: "ns", Key: u, PayloadHash: "h", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
		if err != nil || !res.Claimed {
			t.Fatalf("claim through %s: %+v, %v", u, res, err)
		}
	}
}
