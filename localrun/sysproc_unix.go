//go:build unix

package localrun

import "syscall"

// killGroup sends SIGKILL to the process group led by pid: the function
// and anything it started. Errors (the group is already gone) are ignored.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// termGroup sends SIGTERM to the process group led by pid.
func termGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGTERM) }
