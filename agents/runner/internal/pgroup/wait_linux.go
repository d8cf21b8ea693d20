package pgroup

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// waitAndKillGroup waits for the leader to exit without reaping it (waitid
// with WNOWAIT), so the group id stays reserved, kills what is left of its
// group, then reaps it.
func waitAndKillGroup(cmd *exec.Cmd, pgid int) error {
	const (
		pPID    = 1
		wNOWAIT = 0x01000000
	)
	var siginfo [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(cmd.Process.Pid),
			uintptr(unsafe.Pointer(&siginfo[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			break
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return cmd.Wait()
}

// dieWithWorker makes the kernel send SIGKILL to the group's leader when
// the worker dies (PR_SET_PDEATHSIG), however it dies. It covers only the
// leader, not what it started nor a container: the state directory
// (agents/runner/state) is what lets a restarted worker stop the rest.
func dieWithWorker(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
