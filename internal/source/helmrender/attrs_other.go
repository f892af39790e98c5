//go:build !linux

package helmrender

import "syscall"

// childAttributes are none where the parent's death cannot be signaled to the child.
func childAttributes() *syscall.SysProcAttr { return nil }
