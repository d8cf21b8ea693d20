//go:build !linux

package pgroup

import (
	"os/exec"
	"syscall"
)

// waitAndKillGroup reaps the leader, then kills what is left of its group
// (without waitid's WNOWAIT, the group id is not reserved in between).
func waitAndKillGroup(cmd *exec.Cmd, pgid int) error {
	err := cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return err
}

// dieWithWorker does nothing here: only Linux has PR_SET_PDEATHSIG.
func dieWithWorker(*syscall.SysProcAttr) {}
