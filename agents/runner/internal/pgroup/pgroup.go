// Package pgroup runs a command in its own process group, streams its output
// line by line, and makes sure nothing of the group outlives it: when the
// leader exits, whatever it left running in its group is killed before the
// leader is reaped (so the group id cannot be reused meanwhile).
package pgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Proc is a running process group.
type Proc struct {
	cmd  *exec.Cmd
	pgid int
	done chan struct{}

	mu       sync.Mutex
	exitCode int
	signal   string
	err      error
}

// Start starts cmd as the leader of a new process group (as cred when not
// nil), passing each line of its stdout and stderr to sink.
func Start(cmd *exec.Cmd, cred *syscall.Credential, sink runner.LogSink) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Credential = cred
	dieWithWorker(cmd.SysProcAttr)
	rOut, wOut, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	rErr, wErr, err := os.Pipe()
	if err != nil {
		rOut.Close()
		wOut.Close()
		return nil, err
	}
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = wOut, wErr
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{rOut, wOut, rErr, wErr} {
			f.Close()
		}
		return nil, err
	}
	wOut.Close()
	wErr.Close()
	p := &Proc{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); runner.CopyLines(rOut, agentapi.StreamStdout, sink) }()
	go func() { defer readers.Done(); runner.CopyLines(rErr, agentapi.StreamStderr, sink) }()
	go func() {
		err := waitAndKillGroup(cmd, p.pgid)
		// The group is gone, so the pipes close; a process that left
		// the group (setsid) may still hold them: do not wait for it.
		read := make(chan struct{})
		go func() { readers.Wait(); close(read) }()
		select {
		case <-read:
		case <-time.After(2 * time.Second):
			rOut.Close()
			rErr.Close()
			<-read
		}
		rOut.Close()
		rErr.Close()
		p.mu.Lock()
		p.exitCode, p.signal, p.err = exitStatus(cmd.ProcessState, err)
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exitStatus turns a process state into an exit code: the code, or 128+n
// when signal n ended it.
func exitStatus(ps *os.ProcessState, waitErr error) (int, string, error) {
	if ps == nil {
		return -1, "", waitErr
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal().String(), nil
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return ps.ExitCode(), "", waitErr
	}
	return ps.ExitCode(), "", nil
}

// Done is closed once the group has ended and its output was read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Pid is the leader's process id, which is also the group id.
func (p *Proc) Pid() int { return p.pgid }

// Exit returns the exit code and the name of the signal that ended the
// leader ("" when it exited); valid once Done is closed.
func (p *Proc) Exit() (code int, signal string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.signal, p.err
}

// Signal sends sig to the whole group.
func (p *Proc) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", p.pgid, err)
	}
	return nil
}

// Stop sends SIGTERM to the group, waits up to grace for it to end, then
// sends SIGKILL, and returns once the group has ended (or ctx is done).
func (p *Proc) Stop(ctx context.Context, grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
