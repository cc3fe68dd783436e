// Package storeutil holds the small rules every lambdaidem store applies
// alike: how a time is rounded when stored, and how a long error text is
// cut.
//
//	ms := storeutil.CeilMillis(req.LeaseUntil)
//	text := storeutil.Truncate(req.Error, 4096)
package storeutil

import (
	"time"
	"unicode/utf8"
)

// CeilMillis is t in Unix milliseconds, rounded up: a lease never ends
// earlier, and a record is never forgotten earlier, than asked.
func CeilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// Truncate cuts s to at most n bytes on a character boundary, marking the
// cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…[truncated]"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
