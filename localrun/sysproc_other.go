//go:build unix && !linux

package localrun

import "syscall"

// sysProcAttr puts the function in its own process group, so a kill
// reaches its children too.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
