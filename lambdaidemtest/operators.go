package lambdaidemtest

import (
	"context"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/internal/sim"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// operators schedules the operator actions world c draws, of the kinds
// ops allows, at random moments while messages are sent and delivered.
// Deliveries go on at least until the last of them.
func (k *Kit) operators(c sim.Config, ops Operators) {
	w := k.w
	span := int64(c.SendOver + sim.Horizon/2)
	at := func() time.Duration {
		d := time.Duration(w.Rand().Int64N(span))
		k.lastSend = maxTime(k.lastSend, sim.Epoch.Add(d))
		return d
	}
	if ops.Redrive {
		for range c.Redrive {
			w.At(at(), nil, func() { w.Spawn("redrive", nil, func() { k.redriveOnce(c.MaxRedrives) }) })
		}
	}
	for range c.Forget {
		if ops.Forget || ops.Force {
			w.At(at(), nil, func() { w.Spawn("forget", nil, func() { k.forget(ops.Force && w.Rand().Float64() < c.Force) }) })
		}
		if ops.Release || ops.Force {
			w.At(at(), nil, func() { w.Spawn("release", nil, func() { k.release(ops.Force && w.Rand().Float64() < c.Force) }) })
		}
	}
}

// pickKey returns a key the decorator has reported, preferring one whose
// handler runs now when live is set ("" when there is none yet).
func (k *Kit) pickKey(live bool) string {
	var keys []string
	if live {
		for key, n := range k.running {
			if n > 0 {
				keys = append(keys, key)
			}
		}
	}
	if len(keys) == 0 {
		for key := range k.outcomes {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 || k.ns == "" {
		return ""
	}
	slices.Sort(keys)
	return keys[k.w.Rand().IntN(len(keys))]
}

// record reads key's record now, and whether its lease is still valid.
func (k *Kit) record(key string) (lambdaidem.Record, bool, error) {
	now := k.w.Now()
	rec, err := k.mem.Get(context.Background(), lambdaidem.GetRequest{Namespace: k.ns, Key: key, Now: now})
	return rec, err == nil && rec.Status == lambdaidem.StatusInProgress && !rec.LeaseUntil.Before(now), err
}

// forget is the CLI's forget: the record is deleted, so the key's next
// message runs again; refused under a valid lease unless forced.
func (k *Kit) forget(force bool) {
	key := k.pickKey(force)
	if key == "" {
		return
	}
	_, live, err := k.record(key)
	if err != nil || live && !force {
		return
	}
	k.operatorActions++
	k.w.Logf("operator: forget %s (forced on a valid lease: %v)", key, live)
	_ = k.mem.Delete(context.Background(), lambdaidem.DeleteRequest{Namespace: k.ns, Key: key})
}

// release is the CLI's release: an IN_PROGRESS record becomes FAILED, so
// the next delivery runs at once; refused while the lease is valid unless
// forced, and then its holder's outcome is refused.
func (k *Kit) release(force bool) {
	key := k.pickKey(force)
	if key == "" {
		return
	}
	rec, live, err := k.record(key)
	if err != nil || rec.Status != lambdaidem.StatusInProgress || live && !force {
		return
	}
	k.operatorActions++
	k.w.Logf("operator: release %s (forced on a valid lease: %v)", key, live)
	lease := lambdaidem.Lease{Namespace: k.ns, Key: key, Token: rec.LeaseToken, Until: rec.LeaseUntil, Fence: rec.Fence, Attempt: rec.Attempts}
	_ = k.mem.Fail(context.Background(), lambdaidem.FailRequest{Lease: lease, Now: k.w.Now(), Error: "released by operator", ExpiresAt: rec.ExpiresAt})
}

// redriveOnce is one operator redrive run over the dead-letter queue,
// while Lambda goes on delivering.
func (k *Kit) redriveOnce(maxRedrives int) {
	k.operatorActions++
	k.w.Logf("operator: redrive")
	sum, err := sqsqueue.Redrive(context.Background(), sqsqueue.RedriveOptions{
		Client:             k.svc,
		DeadLetterQueueURL: k.dlq.URL,
		SourceQueues:       []string{k.std.ARN, k.fifo.ARN},
		QueueURLs:          k.svc.QueueURLs(),
		WaitTime:           -1,
		Resetter:           k.mem,
		MaxRedrives:        maxRedrives,
		Now:                k.w.Now,
	})
	k.w.Logf("operator: redrive moved %d, done %d, skipped %d, failed %d (%v)", sum.Moved, sum.Done, sum.Skipped, sum.Failed, err)
}
