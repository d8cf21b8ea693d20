package hpc

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
)

// UserMap maps platform user names to the Linux accounts their batch jobs
// run as (agent.slurm.user_map in the reference architecture). It is a
// YAML file:
//
//	default: klique-jobs   # optional: the account of users not listed
//	users:
//	  alice: alice
//	  bob: bsmith
//
// The file is read again whenever it changes (its size or modification
// time), so accounts can be added without restarting the submitter; a
// change that does not parse is refused and the last good map stays.
type UserMap struct {
	path string

	mu      sync.Mutex
	mod     time.Time
	size    int64
	loaded  bool
	def     string
	users   map[string]string
	lastErr error
}

type userMapFile struct {
	Default string            `yaml:"default"`
	Users   map[string]string `yaml:"users"`
}

// LoadUserMap reads the map at path; it fails when the file cannot be read
// or parsed, so a submitter does not start with a broken map.
func LoadUserMap(path string) (*UserMap, error) {
	m := &UserMap{path: path}
	if err := m.refresh(); err != nil {
		return nil, err
	}
	return m, nil
}

// Path is the map's file.
func (m *UserMap) Path() string { return m.path }

// Account returns the Linux account of a platform user: the user's own
// mapping, else the default. A user with neither is refused with a reason
// naming the user and the file.
func (m *UserMap) Account(user string) (string, error) {
	if err := m.refresh(); err != nil {
		m.mu.Lock()
		loaded := m.loaded
		m.mu.Unlock()
		if !loaded {
			return "", err
		}
		// Keep serving the last good map; the error is reported once.
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.users[user]; a != "" {
		return a, nil
	}
	if m.def != "" {
		return m.def, nil
	}
	return "", fmt.Errorf("the user map %s has no Linux account for platform user %q and no default account: add %q under users: (or set default:) in %s",
		m.path, user, user, m.path)
}

// LastError is the error of the last reading of the file, if it failed.
func (m *UserMap) LastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

func (m *UserMap) refresh() error {
	fi, err := os.Stat(m.path)
	if err != nil {
		return m.fail(fmt.Errorf("user map: %w", err))
	}
	m.mu.Lock()
	same := m.loaded && fi.ModTime().Equal(m.mod) && fi.Size() == m.size
	m.mu.Unlock()
	if same {
		return nil
	}
	raw, err := os.ReadFile(m.path)
	if err != nil {
		return m.fail(fmt.Errorf("user map: %w", err))
	}
	var f userMapFile
	if err := yaml.UnmarshalWithOptions(raw, &f, yaml.Strict()); err != nil {
		return m.fail(fmt.Errorf("user map %s: %w (write default: ACCOUNT and users: {platform-user: linux-account})", m.path, err))
	}
	for u, a := range f.Users {
		if a == "" {
			return m.fail(fmt.Errorf("user map %s: user %q maps to an empty account", m.path, u))
		}
	}
	m.mu.Lock()
	m.mod, m.size, m.loaded, m.def, m.users, m.lastErr = fi.ModTime(), fi.Size(), true, f.Default, f.Users, nil
	m.mu.Unlock()
	return nil
}

func (m *UserMap) fail(err error) error {
	m.mu.Lock()
	m.lastErr = err
	m.mu.Unlock()
	return err
}
