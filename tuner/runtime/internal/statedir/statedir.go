package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// DefaultStudy names the study when the caller gives none.
const DefaultStudy = "default"

var studyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// CheckStudy returns an error when name cannot be used in file names,
// container names and label values.
func CheckStudy(name string) error {
	if !studyName.MatchString(name) {
		return fmt.Errorf("runtime: study name %q: want 1-63 of letters, digits, '_', '.', '-', starting with a letter or digit", name)
	}
	return nil
}

// Default returns the state dir used when none is given.
func Default() string { return filepath.Join(os.TempDir(), "batchtune-runtime") }

// Lock is a held flock on a study's lock file. The kernel releases it when
// the process dies, however it dies, so a lock is never left stale.
type Lock struct {
	f *os.File
}

// Acquire creates dir and takes dir/study.lock without waiting. When another
// process holds it, the error wraps runtime.ErrBusy and names the holder
// (pid@host) as written in the file.
func Acquire(dir, study string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runtime: state dir: %w", err)
	}
	path := filepath.Join(dir, study+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("runtime: state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: study %q is held by %s (lock %s)", runtime.ErrBusy, study, strings.TrimSpace(string(holder)), path)
		}
		return nil, fmt.Errorf("runtime: locking %s: %w", path, err)
	}
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"@"+host+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up; a nil Lock or a second call does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor drops the flock
	l.f = nil
	return err
}

// TrialFiles creates dir (readable by any user, as a container's server may
// run as one) and writes the trial's batching.config and monitoring config
// into it. It returns the two host paths.
func TrialFiles(dir string, cfg runtime.Config) (batching, monitoring string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("runtime: trial dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("runtime: trial dir: %w", err)
	}
	batching = filepath.Join(dir, runtime.BatchingFile)
	monitoring = filepath.Join(dir, runtime.MonitoringFile)
	if err := atomicfile.Write(batching, cfg.Batching, 0o644); err != nil {
		return "", "", fmt.Errorf("runtime: %w", err)
	}
	if err := atomicfile.Write(monitoring, runtime.MonitoringConfig(), 0o644); err != nil {
		return "", "", fmt.Errorf("runtime: %w", err)
	}
	return batching, monitoring, nil
}

// TrialDirs lists the trial-* directories under dir.
func TrialDirs(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "trial-*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out, nil
}
