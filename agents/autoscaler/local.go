package autoscaler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Local is a provider whose "instances" are `klique worker` processes on
// this machine (bare-metal process mode, with the instance type's GPUs
// declared), so the whole scale-from-zero path runs without a cloud: in
// tests and in the README's demo.
type Local struct {
	// Command is the worker command line before its flags (default: this
	// executable and "worker").
	Command []string
	// Dir holds each instance's credential file, work directory and log.
	Dir string
	// Env is added to each worker's environment.
	Env []string
	// RefuseSpot refuses every spot request with ErrNoCapacity, to show
	// the fallback to on-demand.
	RefuseSpot bool
	// Now is the clock of launch times.
	Now func() time.Time

	mu        sync.Mutex
	instances map[string]*localInstance
}

type localInstance struct {
	Instance
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *Local) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Start starts a worker process for the instance.
func (p *Local) Start(ctx context.Context, spec InstanceSpec) (Instance, error) {
	if spec.Spot && p.RefuseSpot {
		return Instance{}, fmt.Errorf("%w: the local provider refuses spot requests (--local-refuse-spot)", ErrNoCapacity)
	}
	command := p.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return Instance{}, fmt.Errorf("local provider: find the klique executable: %w", err)
		}
		command = []string{exe, "worker"}
	}
	dir := filepath.Join(p.Dir, spec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Instance{}, fmt.Errorf("local provider: %w", err)
	}
	tokenFile := filepath.Join(dir, "worker.token")
	if err := os.WriteFile(tokenFile, []byte(spec.Worker.Token), 0o600); err != nil {
		return Instance{}, fmt.Errorf("local provider: write the worker credential: %w", err)
	}
	gpus := "0"
	if spec.GPUs > 1 {
		gpus = "0-" + strconv.Itoa(spec.GPUs-1)
	}
	args := append(append([]string{}, command[1:]...), "--pool", spec.Worker.Pool, "--server", spec.Worker.Server,
		"--token-file", tokenFile, "--gpus", gpus, "--name", spec.Worker.Name, "--work-dir", filepath.Join(dir, "work"))
	args = append(args, spec.Worker.Args...)
	logFile, err := os.OpenFile(filepath.Join(dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Instance{}, fmt.Errorf("local provider: %w", err)
	}
	// Not tied to ctx: an instance outlives the round that started it.
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return Instance{}, fmt.Errorf("local provider: start %s: %w", command[0], err)
	}
	in := &localInstance{Instance: Instance{ID: fmt.Sprintf("local-%d", cmd.Process.Pid), Name: spec.Name, Type: spec.Type, Spot: spec.Spot,
		State: StateRunning, LaunchedAt: p.now(), Tags: spec.Tags}, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(in.done)
	}()
	p.mu.Lock()
	if p.instances == nil {
		p.instances = map[string]*localInstance{}
	}
	p.instances[in.ID] = in
	p.mu.Unlock()
	return in.Instance, nil
}

// Terminate stops workers the way systemd would: SIGTERM (the worker
// reports its tasks preempted and exits), then SIGKILL to the process
// group after a minute.
func (p *Local) Terminate(_ context.Context, ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		in := p.instances[id]
		if in == nil {
			continue
		}
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
		go func() {
			select {
			case <-in.done:
			case <-time.After(time.Minute):
				_ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
			}
		}()
	}
	return nil
}

// List lists the worker processes with the tags that have not exited.
func (p *Local) List(_ context.Context, tags map[string]string) ([]Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Instance
	for id, in := range p.instances {
		select {
		case <-in.done:
			delete(p.instances, id)
			continue
		default:
		}
		match := true
		for k, v := range tags {
			if in.Tags[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, in.Instance)
		}
	}
	return out, nil
}

// Close terminates every worker process and waits for them to exit.
func (p *Local) Close() {
	p.mu.Lock()
	all := make([]*localInstance, 0, len(p.instances))
	ids := make([]string, 0, len(p.instances))
	for _, in := range p.instances {
		all = append(all, in)
		ids = append(ids, in.ID)
	}
	p.mu.Unlock()
	_ = p.Terminate(context.Background(), ids)
	for _, in := range all {
		<-in.done
	}
}
