package lambdaidemtest

import (
	"context"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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
			w.At(at(), nil, func() {
				w.Spawn("forget", nil, func() {
					k.forget(ops.Force && w.Rand().Float64() < c.ForceOps, w.Rand().Float64() < c.AbandonCopy)
				})
			})
		}
		if ops.Release || ops.Force {
			w.At(at(), nil, func() { w.Spawn("release", nil, func() { k.release(ops.Force && w.Rand().Float64() < c.ForceOps) }) })
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

// forget is the CLI's forget, through the store's Admin: the record is
// deleted, so the key's next message runs again; a live lease is refused,
// or when forced revoked (the key is forgotten once that lease has run
// out); a dead-lettered record's copy is abandoned only when abandon is
// set.
func (k *Kit) forget(force, abandon bool) {
	admin, ok := k.base.(idemstore.Admin)
	key := k.pickKey(force)
	if key == "" || !ok {
		return
	}
	res, err := admin.Forget(context.Background(), idemstore.ForgetRequest{
		Namespace: k.ns, Key: key, Now: k.w.Now(), Grace: lambdaidem.DefaultGrace, Force: force, AbandonCopy: abandon,
	})
	if err != nil {
		return
	}
	k.operatorActions++
	k.w.Logf("operator: forget %s (force %v, abandon copy %v, revoked a live lease: %v)", key, force, abandon, res.Revoked)
}

// release is the CLI's release, through the store's Admin: an
// IN_PROGRESS record whose lease ended becomes FAILED, so the next
// delivery runs at once; a live lease is refused, or when forced revoked
// (its holder's outcome is refused, and the key is taken over once that
// lease has run out).
func (k *Kit) release(force bool) {
	admin, ok := k.base.(idemstore.Admin)
	key := k.pickKey(force)
	if key == "" || !ok {
		return
	}
	rec, err := admin.Get(context.Background(), idemstore.GetRequest{Namespace: k.ns, Key: key, Now: k.w.Now()})
	if err != nil || rec.Status != lambdaidem.StatusInProgress {
		return
	}
	out, err := admin.Release(context.Background(), idemstore.ReleaseRequest{
		Namespace: k.ns, Key: key, Token: rec.LeaseToken, Now: k.w.Now(), Grace: lambdaidem.DefaultGrace, Force: force,
	})
	if err != nil {
		return
	}
	k.operatorActions++
	k.w.Logf("operator: release %s (now %s)", key, out.Status)
	k.rerun(key, "release")
}

// redriveOnce is one operator redrive run over the dead-letter queue,
// while Lambda goes on delivering. Like the CLI's, it leaves
// outcome_unknown copies where they are (reading their records, through
// the store, to delete those whose work is done).
func (k *Kit) redriveOnce(maxRedrives int) {
	resetter, ok := k.base.(idemstore.DeadLetterResetter)
	if !ok {
		return
	}
	k.operatorActions++
	k.w.Logf("operator: redrive")
	sum, err := sqsqueue.Redrive(context.Background(), sqsqueue.RedriveOptions{
		Client:             k.svc,
		DeadLetterQueueURL: k.dlq.URL,
		SourceQueues:       []string{k.std.ARN, k.fifo.ARN},
		QueueURLs:          k.svc.QueueURLs(),
		WaitTime:           -1,
		Resetter:           countingResetter{resetter, k},
		MaxRedrives:        maxRedrives,
		Now:                k.w.Now,
	})
	k.w.Logf("operator: redrive moved %d, done %d, skipped %d, failed %d (%v)", sum.Moved, sum.Done, sum.Skipped, sum.Failed, err)
}
