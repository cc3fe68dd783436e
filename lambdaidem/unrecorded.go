package lambdaidem

import (
	"sync"
	"sync/atomic"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// maxUnrecorded bounds the outcomes a container remembers it could not
// write; beyond it the oldest are forgotten (their keys then behave as
// after a crash).
const maxUnrecorded = 1024

// unrecordedCompletions remembers, per key, an outcome this container
// could not write: a completion, although the handler succeeded, or a
// final dead-letter mark, although the copy is in the dead-letter queue.
// A redelivery of the key to this container writes it (fenced by the lease
// token, so it applies only if nobody took the key over) instead of
// running the handler again or sending a second copy.
type unrecordedCompletions struct {
	n     atomic.Int32 // len(items), read without the lock
	mu    sync.Mutex
	order []string
	items map[string]unrecordedCompletion
}

type unrecordedCompletion struct {
	hash string
	req  idemstore.CompleteRequest
	// mark, when set, is a final dead-letter mark (the copy was sent)
	// instead of a completion.
	mark *idemstore.DeadLetterRequest
}

func newUnrecorded() *unrecordedCompletions {
	return &unrecordedCompletions{items: map[string]unrecordedCompletion{}}
}

func (u *unrecordedCompletions) add(key, hash string, req idemstore.CompleteRequest) {
	u.put(key, unrecordedCompletion{hash: hash, req: req})
}

// addMark remembers a final dead-letter mark that could not be written
// after its copy was sent.
func (u *unrecordedCompletions) addMark(key, hash string, req idemstore.DeadLetterRequest) {
	u.put(key, unrecordedCompletion{hash: hash, mark: &req})
}

func (u *unrecordedCompletions) put(key string, it unrecordedCompletion) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		u.order = append(u.order, key)
	}
	u.items[key] = it
	for len(u.order) > maxUnrecorded {
		delete(u.items, u.order[0])
		u.order = u.order[1:]
	}
	u.n.Store(int32(len(u.items)))
}

// get returns the remembered outcome of key with this payload hash.
func (u *unrecordedCompletions) get(key, hash string) (unrecordedCompletion, bool) {
	if u.n.Load() == 0 {
		return unrecordedCompletion{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	it, ok := u.items[key]
	return it, ok && it.hash == hash
}

func (u *unrecordedCompletions) drop(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		return
	}
	delete(u.items, key)
	u.n.Store(int32(len(u.items)))
	for i, k := range u.order {
		if k == key {
			u.order = append(u.order[:i], u.order[i+1:]...)
			break
		}
	}
}
