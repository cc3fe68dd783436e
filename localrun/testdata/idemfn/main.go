// Command idemfn is a test function for package localrun's
// multi-concurrency mode: the lambdaidem decorator over one in-memory store
// shared by every invocation of the process, with the cache, the lease
// heartbeat and the EMF hook on. Built with -race, it shows whether they
// are safe when aws-lambda-go runs several invocations at once.
//
// Each body is {"key": K, "do": D}. D "barrier" waits until
// IDEMFN_BARRIER handlers are running at once (proof that invocations
// overlap in this process); every handler then prints "effect K".
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

func main() {
	need, _ := strconv.Atoi(os.Getenv("IDEMFN_BARRIER"))
	var arrived atomic.Int32
	all := make(chan struct{})
	var closeAll sync.Once
	var out sync.Mutex // one line per effect, whole
	handle := func(ctx context.Context, m events.SQSMessage) error {
		var b struct{ Key, Do string }
		if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
			return lambdaidem.Poison(err)
		}
		if b.Do == "barrier" {
			if int(arrived.Add(1)) >= need {
				closeAll.Do(func() { close(all) })
			}
			select {
			case <-all:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		out.Lock()
		fmt.Printf("effect %s\n", b.Key)
		out.Unlock()
		return nil
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lambda.Start(lambdaidem.SQS(memstore.New(), handle,
		lambdaidem.WithNamespace("idemfn"),
		lambdaidem.WithKeyJSONField("key"),
		lambdaidem.WithConcurrency(2),
		lambdaidem.WithCache(64, time.Minute),
		lambdaidem.WithLease(2*time.Second),
		lambdaidem.WithHeartbeat(10*time.Millisecond),
		lambdaidem.WithLogger(logger),
		lambdaidem.WithInvocationHook(emf.Hook(
			emf.WithEmitter(emf.NewWriter(os.Stdout)),
			emf.WithLogger(logger),
			emf.WithTenantDimension(),
		)),
	))
}
