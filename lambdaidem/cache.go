package lambdaidem

import (
	"container/list"
	"sync"
	"time"
)

// completedCache remembers completed keys of this container for a bounded
// time. It is keyed with the payload hash, so a different payload under a
// cached key still goes to the store and is seen as a conflict there.
type completedCache struct {
	mu    sync.Mutex
	size  int
	ttl   time.Duration
	order *list.List // front = most recently used
	items map[string]*list.Element
}

type cacheEntry struct {
	key   string
	hash  string
	until time.Time
}

func newCompletedCache(size int, ttl time.Duration) *completedCache {
	if size <= 0 || ttl <= 0 {
		return nil
	}
	return &completedCache{size: size, ttl: ttl, order: list.New(), items: make(map[string]*list.Element, size)}
}

// hit reports whether key completed with this hash and is still fresh.
func (c *completedCache) hit(key, hash string, now time.Time) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.until) {
		c.order.Remove(el)
		delete(c.items, key)
		return false
	}
	c.order.MoveToFront(el)
	return e.hash == hash
}

// add remembers a completed key until min(now+ttl, limit) (limit zero: none).
func (c *completedCache) add(key, hash string, now, limit time.Time) {
	if c == nil {
		return
	}
	until := now.Add(c.ttl)
	if !limit.IsZero() && limit.Before(until) {
		until = limit
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value = &cacheEntry{key: key, hash: hash, until: until}
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&cacheEntry{key: key, hash: hash, until: until})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}
