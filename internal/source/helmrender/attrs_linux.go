package helmrender

import "syscall"

// childAttributes end a child with its operator: a rendering nobody waits for (the
// operator killed) stops at once rather than at its deadline's kill, which nobody sends.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
