//go:build unix

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Holder identifies the process that holds a store for writing. It is
// written to the store's lock file right after the lock is taken, because
// flock itself cannot say who holds it.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	// BootID and StartTicks (the process's start time in clock ticks
	// since boot, /proc/PID/stat) tell a live holder from a dead one
	// whose PID was reused. Empty or zero where /proc is not available.
	BootID     string `json:"boot_id,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
}

// InUseError is returned (wrapping ErrInUse) when the store's writer lock
// could not be taken within the timeout.
type InUseError struct {
	Path string
	// Holder is the recorded holder; nil when there is no record or the
	// record is stale.
	Holder *Holder
	// Note says why there is no believable holder, or that it could not
	// be checked (another host).
	Note string
}

func (e *InUseError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("store: %s is in use by another process (%s)", e.Path, e.Note)
	}
	h := e.Holder
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s is in use by pid %d on host %s (%s, since %s)", e.Path, h.PID, h.Host, h.Command, h.Since.Local().Format(time.DateTime+" MST"))
	if e.Note != "" {
		b.WriteString("; " + e.Note)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// writerLock is the exclusive lock a writing DB holds on PATH.lock for its
// lifetime. bbolt's own lock on the data file is held only during each
// transaction, so readers can interleave with a long-running writer.
type writerLock struct {
	f *os.File
}

// lockPath is where the writer lock and its holder record live.
func lockPath(path string) string { return path + ".lock" }

// acquireWriter takes the writer lock on path within timeout (or ctx),
// then records self as the holder. On timeout it returns an *InUseError
// naming the holder, unless the recorded holder is provably dead.
func acquireWriter(ctx context.Context, path string, timeout time.Duration, self Holder) (*writerLock, error) {
	f, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	if err := flockWait(ctx, f, syscall.LOCK_EX, timeout); err != nil {
		f.Close()
		if errors.Is(err, errLockTimeout) {
			return nil, inUse(path)
		}
		return nil, fmt.Errorf("store: lock %s: %w", lockPath(path), err)
	}
	if err := writeHolder(f, self); err != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("store: lock %s: record holder: %w", lockPath(path), err)
	}
	return &writerLock{f: f}, nil
}

// release clears the holder record and unlocks. The record is cleared
// while the lock is still held, so it never erases a later holder's.
func (l *writerLock) release() error {
	err := l.f.Truncate(0)
	if uerr := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN); err == nil {
		err = uerr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

var errLockTimeout = errors.New("lock wait timed out")

// flockWait takes flock how on f, retrying until timeout or ctx ends.
func flockWait(ctx context.Context, f *os.File, how int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !time.Now().Before(deadline) {
			return errLockTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(25*time.Millisecond, time.Until(deadline)+time.Millisecond)):
		}
	}
}

func writeHolder(f *os.File, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// inUse builds the error for a store whose writer lock is held, checking
// the recorded holder so that a stale record is not believed.
func inUse(path string) error {
	e := &InUseError{Path: path}
	b, err := os.ReadFile(lockPath(path))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		e.Note = "it left no holder record"
		return e
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil || h.PID <= 0 {
		e.Note = "its holder record is unreadable"
		return e
	}
	host, _ := os.Hostname()
	if h.Host != host {
		e.Holder = &h
		e.Note = "on another host: not checked from here"
		return e
	}
	if alive, why := holderAlive(h); !alive {
		e.Note = fmt.Sprintf("the holder record names pid %d, %s: not believed", h.PID, why)
		return e
	}
	e.Holder = &h
	return e
}

// holderAlive reports whether the recorded holder is a running process on
// this host, and why not.
func holderAlive(h Holder) (bool, string) {
	if h.BootID != "" && h.BootID != bootID() {
		return false, "written before the machine last booted"
	}
	if err := syscall.Kill(h.PID, 0); errors.Is(err, syscall.ESRCH) {
		return false, "which has exited"
	}
	if h.StartTicks != 0 {
		if t, ok := startTicks(h.PID); ok && t != h.StartTicks {
			return false, "which has exited (the pid now belongs to another process)"
		}
	}
	return true, ""
}

// self describes this process as a holder.
func self(command string) Holder {
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, Command: command, Since: time.Now().UTC().Truncate(time.Second), BootID: bootID()}
	if t, ok := startTicks(h.PID); ok {
		h.StartTicks = t
	}
	return h
}

// defaultCommand names this process as "batchtune tune": the program and
// its subcommand, never its flags (they may hold paths or tokens).
func defaultCommand() string {
	if len(os.Args) == 0 {
		return "unknown"
	}
	c := filepath.Base(os.Args[0])
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		c += " " + os.Args[1]
	}
	return c
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// startTicks reads field 22 of /proc/PID/stat, the process's start time.
func startTicks(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields after it start at field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, false
	}
	t, err := strconv.ParseUint(fields[19], 10, 64)
	return t, err == nil
}
