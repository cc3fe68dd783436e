//go:build unix

package otelidem_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time so far, user and system, every thread
// (the garbage collector's and the span processor's included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
