//go:build linux

package localrun

import "syscall"

// sysProcAttr puts the function in its own process group, so a kill
// reaches its children too, and asks the kernel to kill it if the runner
// dies, so a crashed runner leaves no orphans.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
