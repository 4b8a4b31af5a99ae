package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/batchtune/batchtune/store"
)

// storeFile writes a store with some history and returns its path, closed.
func storeFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		r := newRun(t, db, name)
		for i := 1; i <= 40; i++ {
			addTrial(t, db, r, store.TrialSucceeded, int64(i))
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// flipPageFlags sets the flags of every page after the two meta pages to
// a value no page has, as issue 15 did to a served store.
func flipPageFlags(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	if len(data) < 4*pageSize || os.Getpagesize() != pageSize {
		t.Fatalf("store of %d bytes, page size %d: the corruption below assumes 4 KiB pages", len(data), os.Getpagesize())
	}
	for off := 2 * pageSize; off+16 <= len(data); off += pageSize {
		data[off+8], data[off+9] = 0x5a, 0x5a
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// unlocked reports whether no process holds a bbolt file lock on path:
// a leaked handle would keep its flock.
func unlocked(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// TestCorruptStoreIsAnErrorNotAPanic: flipped page flags and a truncated
// file give ErrCorrupt that says what to do, for readers and writers;
// the file's lock is released; the DB refuses every later call.
func TestCorruptStoreIsAnErrorNotAPanic(t *testing.T) {
	corruptions := []struct {
		name string
		do   func(t *testing.T, path string)
		says string // in the error, beside what to do
	}{
		{"page flags flipped", flipPageFlags, "bbolt failed reading it"},
		// bbolt reads the pages past the end without checking the
		// length: a memory fault that killed the test binary in CI.
		{"truncated to 8192 bytes", func(t *testing.T, path string) {
			if err := os.Truncate(path, 8192); err != nil {
				t.Fatal(err)
			}
		}, "it was truncated"},
		{"tail cut off", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "it was truncated"},
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			path := storeFile(t)
			c.do(t, path)
			before, _ := os.ReadFile(path)

			// A reader: the first call that reaches the bad pages fails.
			ro, err := store.Open(path, &store.Options{ReadOnly: true})
			if err == nil {
				_, err = ro.StudyTrials(ctx, "b")
				if err == nil {
					_, err = ro.StudyTrials(ctx, "c")
				}
			}
			t.Logf("reading: %v", err)
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "Move it aside (mv "+path) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("reading: %v, want store: corrupt, %q, with what to do", err, c.says)
			}
			if ro != nil {
				if _, again := ro.Studies(ctx); !errors.Is(again, store.ErrCorrupt) {
					t.Errorf("the next call: %v, want the same corrupt error", again)
				}
				if ro.Corrupt() == nil {
					t.Error("Corrupt() is nil after a corrupt read")
				}
				ro.Close()
			}
			if !unlocked(t, path) {
				t.Error("the file is still locked: the handle leaked")
			}

			// A writer refuses to write into it.
			w, err := store.Open(path, nil)
			if err == nil {
				w.Close()
				t.Fatal("a writer opened the corrupt store")
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("writer: %v, want store: corrupt", err)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(before) {
				t.Error("the corrupt file was written to")
			}
		})
	}
}

// TestEmptyFileIsNotAStore: a 0-byte file opened read-only says so, and
// stays 0 bytes with no lock file beside it.
func TestEmptyFileIsNotAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "batchtune.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(path, &store.Options{ReadOnly: true})
	if !errors.Is(err, store.ErrNotAStore) || !strings.Contains(err.Error(), "not a batchtune store") {
		t.Fatalf("read-only open of an empty file: %v, want ErrNotAStore", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("the empty file grew to %d bytes", fi.Size())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("files beside the store: %v, want none", entries)
	}
}
