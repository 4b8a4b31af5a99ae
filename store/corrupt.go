package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrNotAStore means the file is not a batchtune store at all (empty, or
// another program's file); nothing was written to it.
var ErrNotAStore = errors.New("store: not a batchtune store")

// corruptError is ErrCorrupt with what to do about it.
func corruptError(path, why string) error {
	return fmt.Errorf("%w: %s: %s; batchtune will not read or write it again in this process. "+
		"Move it aside (mv %s %s.corrupt) and run again to start a new store; the exported "+
		"batching.config files keep the last good configuration, and a backup of the store, if "+
		"you keep one, holds the last good history", ErrCorrupt, path, why, path, path)
}

// Corrupt returns the error that marked db's file corrupt, or nil. Once
// set, every call on db returns it without touching the file again.
func (db *DB) Corrupt() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.corrupt
}

// guardedTx runs one bbolt transaction (boltTx). bbolt panics on some
// corrupt pages, in Open as well as in a transaction; the panic is turned
// into ErrCorrupt, the file handle (and with it the file lock) is closed,
// and db refuses every later call. Without this a recovered panic (as
// net/http recovers one) leaked the handle and its lock, and every later
// call answered "in use".
func (db *DB) guardedTx(timeout time.Duration, write bool, fn func(*bolt.Tx) error) (err error) {
	if db.ro {
		if fi, serr := os.Stat(db.path); serr == nil && fi.Size() == 0 {
			// bbolt would try to initialise it (and fail on the read-only
			// handle with "bad file descriptor").
			return fmt.Errorf("%w: %s is empty (0 bytes); a store is created by batchtune tune or daemon", ErrNotAStore, db.path)
		} else if serr == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrNotAStore, db.path)
		} else if errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s (it was removed)", ErrNotExist, db.path)
		}
	}
	if err := checkNotTruncated(db.path); err != nil {
		db.corrupt = err
		db.log.Error("store is corrupt", "path", db.path, "err", err)
		return err
	}
	// A fault reading the mapped file (a page past its end, an I/O error
	// on the device) becomes a panic that the recover below turns into
	// ErrCorrupt, instead of a fatal error that kills the daemon.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var files []*os.File
	opts := &bolt.Options{
		Timeout:  timeout,
		ReadOnly: db.ro,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil {
				files = append(files, f)
			}
			return f, err
		},
	}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		// bbolt's own Close did not run (the panic came from Open) or
		// may not have: unmapping the file and closing the descriptor
		// drop its flock. A second Close of a closed *os.File is
		// harmless; a file bbolt closed itself is no longer mapped.
		for _, f := range files {
			unmapFile(f)
			_ = f.Close()
		}
		db.corrupt = corruptError(db.path, fmt.Sprintf("bbolt failed reading it (%v)", p))
		db.log.Error("store is corrupt", "path", db.path, "panic", fmt.Sprint(p))
		err = db.corrupt
	}()
	return db.boltTx(opts, write, fn)
}

// checkBeforeWriting runs bbolt's consistency check before a writer's
// first transaction, so that batchtune never writes into a file it could
// not read back. A store that fails it is marked corrupt.
func (db *DB) checkBeforeWriting(ctx context.Context) error {
	if fi, err := os.Stat(db.path); err != nil || fi.Size() == 0 {
		return nil // a new store
	}
	return db.view(ctx, func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			db.corrupt = corruptError(db.path, errors.Join(errs...).Error())
			return db.corrupt
		}
		return nil
	})
}
