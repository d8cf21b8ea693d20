package worker

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/klique-ai/klique/agents/hostuser"
	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// What keeps the tasks on one host apart (docs/worker.md, "What is
// isolated on a host"). In process mode every task would otherwise run
// under one uid, and any task could read another's environment (its
// secrets, its metrics token) from /proc and its files. So:
//
//   - A worker running as root gives each task a uid of its own (its
//     owner's account from the user map, else one taken from
//     Config.TaskUIDs for the task's life) and each project a gid of its
//     own. The task's directory is 0700 and its own; its project's
//     environment cache is 0770 and the project's group's.
//   - A worker that cannot (not root, or --run-as one user) runs tasks of
//     one project at a time: its claims ask only for the project it runs
//     now (agentapi.ClaimRequest.Project), unless the pool is
//     single-tenant.
//   - Docker, Kubernetes and HPC runners keep each task in its own
//     container, pod or job: nothing here applies to them.

// AccountMap maps a platform user to the Linux account their tasks run as
// (hpc.UserMap, the file the HPC submitters read, is one).
type AccountMap interface {
	Account(user string) (string, error)
}

// isolation is the worker's per-task users and per-project groups.
type isolation struct {
	uids, gids *hostuser.Pool // nil: tasks share the runner's user
	// shared says why tasks share the runner's user although the worker
	// runs as root (the work directory out of the tasks' users' reach).
	shared string
	users  AccountMap
	envs   string // the projects' environment caches

	mu       sync.Mutex
	projects map[string]uint32 // project → gid
}

// newIsolation checks the configuration of per-task users.
func newIsolation(cfg *Config) (*isolation, error) {
	iso := &isolation{projects: map[string]uint32{}, envs: filepath.Join(cfg.WorkDir, "envs")}
	if cfg.TaskUIDs == nil || !hostShared(cfg) {
		return iso, nil
	}
	if err := cfg.TaskUIDs.Check(); err != nil {
		return nil, fmt.Errorf("--task-uids %s: %w", cfg.TaskUIDs, err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("--task-uids: giving each task a uid of its own needs the worker to run as root; without root, leave --task-uids out (tasks of one project run at a time)")
	}
	iso.uids, iso.gids, iso.users = hostuser.NewPool(*cfg.TaskUIDs), hostuser.NewPool(*cfg.TaskUIDs), cfg.UserMap
	return iso, nil
}

// hostShared reports whether the runner runs tasks side by side on this
// host with nothing of their own but what the worker gives them (process
// mode), rather than each in its own container, pod or job.
func hostShared(cfg *Config) bool {
	return cfg.Runner.Name() == agentapi.ModeProcess && !cfg.Placed
}

// switches reports whether each task runs under a uid of its own.
func (iso *isolation) switches() bool { return iso.uids != nil }

// prepare readies the work directory for tasks of different users: it and
// the tasks' directory are 0711 (a task reaches its own directory, lists
// none), every directory above it must let them through, and the
// projects' caches left by an earlier run are closed (their groups may now
// be other projects').
//
// With byDefault (per-task users not asked for), a work directory the
// tasks' users cannot reach turns them off instead of failing: the worker
// runs as a worker that cannot switch users does.
func (iso *isolation) prepare(workDir, tasksDir string, byDefault bool) error {
	if !iso.switches() {
		return nil
	}
	for _, d := range []string{workDir, tasksDir, iso.envs} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	if blocked, err := blockedAbove(workDir); err != nil {
		return err
	} else if blocked != "" {
		why := fmt.Sprintf("the tasks' users cannot reach the work directory %s: %s; let them through (chmod o+x) or pick another --work-dir", workDir, blocked)
		if !byDefault {
			return errors.New(why)
		}
		// Not asked for: tasks share the worker's user, one project at a
		// time (the claim rule), and the start says why.
		iso.uids, iso.gids, iso.users, iso.shared = nil, nil, nil, why
		return nil
	}
	des, err := os.ReadDir(iso.envs)
	if err != nil {
		return err
	}
	for _, de := range des {
		p := filepath.Join(iso.envs, de.Name())
		if err := os.Chown(p, 0, 0); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// blockedAbove names the first directory above dir that other users
// cannot pass through, with its mode, or "" when every one lets them.
func blockedAbove(dir string) (string, error) {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return "", err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Sprintf("%s is mode %o", d, fi.Mode().Perm()), nil
		}
		if d == filepath.Dir(d) {
			return "", nil
		}
	}
}

// projectGID is the group of a project's tasks, taken for the worker's
// life on first use.
func (iso *isolation) projectGID(project string) (uint32, error) {
	iso.mu.Lock()
	defer iso.mu.Unlock()
	if g, ok := iso.projects[project]; ok {
		return g, nil
	}
	g, err := iso.gids.Take()
	if err != nil {
		return 0, err
	}
	iso.projects[project] = g
	return g, nil
}

// account gives a task the account it runs as, its project's cache, and a
// release for when the task is gone; nil when the worker does not switch
// users.
func (iso *isolation) account(a *agentapi.Assignment, dir string) (acct *runner.Account, cache string, release func(), err error) {
	release = func() {}
	if !iso.switches() {
		return nil, "", release, nil
	}
	project := a.ProjectID
	if project == "" {
		project = a.Project
	}
	gid, err := iso.projectGID(project)
	if err != nil {
		return nil, "", release, err
	}
	if cache, err = iso.projectCache(project, gid); err != nil {
		return nil, "", release, fmt.Errorf("the project's environment cache: %w", err)
	}
	if acct := iso.mapped(a.Owner, gid); acct != nil {
		return acct, cache, release, nil
	}
	uid, err := iso.uids.Take()
	if err != nil {
		return nil, "", release, err
	}
	acct = &runner.Account{Name: "klique-task-" + strconv.FormatUint(uint64(uid), 10), UID: uid, GID: gid,
		Groups: []uint32{gid}, Home: filepath.Join(dir, "home")}
	return acct, cache, func() {
		// Whatever the task left running under its uid (outside its
		// process group) goes before the uid goes to another task.
		hostuser.Kill(uid)
		iso.uids.Give(uid)
	}, nil
}

// mapped is the account of a task's owner in the user map, with the
// project's group added; nil when there is no map or it names no account
// that exists (the task then gets a uid of the range).
func (iso *isolation) mapped(owner string, gid uint32) *runner.Account {
	if iso.users == nil || owner == "" {
		return nil
	}
	name, err := iso.users.Account(owner)
	if err != nil {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	pgid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil
	}
	acct := &runner.Account{Name: u.Username, UID: uint32(uid), GID: uint32(pgid), Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				acct.Groups = append(acct.Groups, uint32(g))
			}
		}
	}
	acct.Groups = append(acct.Groups, gid)
	return acct
}

// projectCache is the project's environment cache: 0770, root's and the
// project's group's, so that its tasks share it and no other can enter.
func (iso *isolation) projectCache(project string, gid uint32) (string, error) {
	d := filepath.Join(iso.envs, safeName(project))
	if err := os.MkdirAll(d, 0o770); err != nil {
		return "", err
	}
	if err := os.Chown(d, 0, int(gid)); err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o770)
}

// claimProject is the project a claim asks for: the one the worker runs
// now, when its tasks share a user and the pool is not single-tenant; ""
// when any will do.
func (w *Worker) claimProject() string {
	if !hostShared(&w.cfg) || w.iso.switches() {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.singleTenant {
		return ""
	}
	for _, t := range w.tasks {
		if t.a.ProjectID != "" {
			return t.a.ProjectID
		}
	}
	return ""
}

// logIsolation says at start what keeps this host's tasks apart.
func (w *Worker) logIsolation(singleTenant bool) {
	switch {
	case !hostShared(&w.cfg):
		w.log.Info("each task runs in its own "+w.cfg.Runner.Name()+" environment", "mode", w.cfg.Runner.Name())
	case w.iso.switches():
		w.log.Info("each task runs under a uid of its own", "uids", w.cfg.TaskUIDs.String(), "userMap", w.iso.users != nil)
	case singleTenant:
		w.log.Warn("tasks on this host share one user and can read each other's environment and files; the pool is single-tenant, so tasks of different projects run side by side")
	case w.iso.shared != "":
		w.log.Warn("tasks on this host share one user because " + w.iso.shared + ": it runs tasks of one project at a time, or mark the pool singleTenant in the estate")
	default:
		w.log.Warn("tasks on this host share one user (the worker is not root, or runs tasks --run-as one user): it runs tasks of one project at a time; run it as root to give each task a uid of its own, or mark the pool singleTenant in the estate")
	}
}

// takeAccount gives the task its account and cache (none when the worker
// does not switch users) and readies what the account needs in its
// directory: a home and a temporary directory of its own.
func (t *task) takeAccount() (*runner.Account, string, error) {
	acct, cache, release, err := t.w.iso.account(t.a, t.dir)
	if err != nil {
		return nil, "", err
	}
	t.mu.Lock()
	t.release = release
	t.mu.Unlock()
	if acct == nil {
		return nil, "", nil
	}
	for _, d := range []string{filepath.Join(t.dir, "home"), filepath.Join(t.dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, "", err
		}
	}
	return acct, cache, nil
}

// releaseAccount ends what the task's account holds once its directory is
// gone: what still runs under its uid is killed and the uid goes back to
// the range. A directory kept (KeepTaskDirs) is given to root first, so
// the next task with the uid cannot read it.
func (t *task) releaseAccount() {
	t.mu.Lock()
	release := t.release
	t.release = nil
	t.mu.Unlock()
	if release == nil {
		return
	}
	if t.w.cfg.KeepTaskDirs && t.w.iso.switches() {
		_ = filepath.WalkDir(t.dir, func(p string, _ os.DirEntry, err error) error {
			if err == nil {
				_ = os.Lchown(p, 0, 0)
			}
			return nil
		})
	}
	release()
}
