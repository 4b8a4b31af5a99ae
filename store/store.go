package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultTimeout is how long Open waits for another writer to let go of
// the store, and how long each transaction waits for another process's
// transaction to end, when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Options configure Open. A nil *Options means the zero Options.
type Options struct {
	// ReadOnly opens an existing store for reading only. Any number of
	// read-only DBs may be open while one writer is.
	ReadOnly bool
	// Timeout bounds every wait for a lock; zero means DefaultTimeout.
	// There is no infinite wait: a negative Timeout means do not wait.
	Timeout time.Duration
	// Command says what the writer is doing, for the in-use error other
	// processes get ("batchtune tune"); empty means the program and its
	// subcommand.
	Command string
	// Logger receives debug records of opens, closes and resumes; nil
	// discards them.
	Logger *slog.Logger
}

// DB is a batchtune store: studies, their runs, their trials and their
// recommendations in one bbolt file.
//
// A writing DB holds the store's writer lock (PATH.lock) from Open to
// Close, so a second writer gets an *InUseError naming it. The bbolt file
// itself is opened only for each transaction, so read-only DBs in other
// processes can read between the writer's transactions instead of waiting
// for it to exit. A DB is safe for concurrent use; its transactions run
// one at a time.
type DB struct {
	path    string
	ro      bool
	timeout time.Duration
	log     *slog.Logger
	lock    *writerLock // nil when read-only

	mu     sync.Mutex // serialises transactions and Close
	closed bool
	// corrupt, once set, is returned by every later transaction: the file
	// is not touched again (see guardedOpen).
	corrupt error
}

// Open opens the store at path, creating it (and the layout) when it does
// not exist, unless opts.ReadOnly. Another writer holding the store makes
// Open fail after opts.Timeout with an *InUseError. A store written by a
// newer layout is refused with ErrSchemaTooNew.
func Open(path string, opts *Options) (*DB, error) {
	ctx := context.Background()
	var o Options
	if opts != nil {
		o = *opts
	}
	db := &DB{path: path, ro: o.ReadOnly, timeout: o.Timeout, log: o.Logger}
	if db.timeout == 0 {
		db.timeout = DefaultTimeout
	}
	if db.timeout < 0 {
		db.timeout = 0
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	if db.ro {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s (nothing has been stored there yet)", ErrNotExist, path)
		}
	} else {
		cmd := o.Command
		if cmd == "" {
			cmd = defaultCommand()
		}
		l, err := acquireWriter(ctx, path, db.timeout, self(cmd))
		if err != nil {
			return nil, err
		}
		db.lock = l
	}
	var err error
	if db.ro {
		err = db.view(ctx, checkLayout)
	} else if err = db.checkBeforeWriting(ctx); err == nil {
		err = db.update(ctx, initLayout)
	}
	if err != nil {
		if db.lock != nil {
			_ = db.lock.release()
		}
		return nil, err
	}
	db.log.Debug("store opened", "path", path, "read_only", db.ro)
	return db, nil
}

// Path returns the store's file.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether db was opened read-only.
func (db *DB) ReadOnly() bool { return db.ro }

// Close releases the writer lock. Calls after Close return ErrClosed.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.log.Debug("store closed", "path", db.path)
	if db.lock != nil {
		if err := db.lock.release(); err != nil {
			return fmt.Errorf("store: release lock: %w", err)
		}
	}
	return nil
}

// Check runs bbolt's consistency check over the whole file and returns
// every inconsistency found, joined; nil means the file is sound.
func (db *DB) Check(ctx context.Context) error {
	return db.view(ctx, func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, db.path, errors.Join(errs...))
		}
		return nil
	})
}

// view runs fn in a read transaction.
func (db *DB) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	return db.tx(ctx, false, fn)
}

// update runs fn in a write transaction, committed (and synced to disk)
// when fn returns nil.
func (db *DB) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if db.ro {
		return fmt.Errorf("%w: %s", ErrReadOnly, db.path)
	}
	return db.tx(ctx, true, fn)
}

// tx opens the bbolt file, runs fn in one transaction and closes the file
// again, so that the file lock is held only as long as the transaction.
func (db *DB) tx(ctx context.Context, write bool, fn func(*bolt.Tx) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.corrupt != nil {
		return db.corrupt
	}
	timeout := db.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	// bbolt reads a zero timeout as "wait for ever"; the shortest wait
	// it knows is one attempt.
	timeout = max(timeout, time.Nanosecond)
	return db.guardedTx(timeout, write, fn)
}

// boltTx opens the file, runs fn in one transaction and closes it; the
// caller (guardedTx) turns bbolt's panics into errors.
func (db *DB) boltTx(opts *bolt.Options, write bool, fn func(*bolt.Tx) error) error {
	b, err := bolt.Open(db.path, 0o600, opts)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			if db.ro {
				// The writer is mid-transaction (or another program
				// holds the file): name the writer when it is known.
				return fmt.Errorf("%w (waited %s for its transaction to end)", inUse(db.path), opts.Timeout)
			}
			return fmt.Errorf("%w: %s is locked by a reader's long transaction or another program (waited %s)", ErrInUse, db.path, opts.Timeout)
		}
		if errors.Is(err, berrors.ErrInvalid) {
			db.corrupt = fmt.Errorf("%w: %s is not a bbolt file (%v): check --db, or move it aside to start a new store there", ErrNotAStore, db.path, err)
			return db.corrupt
		}
		if errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
			db.corrupt = corruptError(db.path, err.Error())
			return db.corrupt
		}
		return fmt.Errorf("store: open %s: %w", db.path, err)
	}
	defer b.Close()
	if write {
		return b.Update(fn)
	}
	return b.View(fn)
}

// Bucket names.
var (
	bucketMeta    = []byte("meta")
	bucketStudies = []byte("studies")
	bucketRuns    = []byte("runs")
	bucketTrials  = []byte("trials")
	bucketMeas    = []byte("measurements")
	bucketRecs    = []byte("recommendations")
	keyLayout     = []byte("layout")
	keyStudy      = []byte("study")
	keyRun        = []byte("run")
)

// initLayout creates the top-level buckets of a new store and checks the
// layout version of an existing one.
func initLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketStudies) != nil {
			return fmt.Errorf("%w: %s has studies but no meta bucket", ErrCorrupt, tx.DB().Path())
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		v, err := encode(layoutRecord{Layout: LayoutVersion})
		if err != nil {
			return err
		}
		if err := meta.Put(keyLayout, v); err != nil {
			return err
		}
		_, err = tx.CreateBucket(bucketStudies)
		return err
	}
	return checkLayout(tx)
}

type layoutRecord struct {
	Layout int `json:"layout"`
}

func checkLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: %s is not a batchtune store (no meta bucket)", ErrCorrupt, tx.DB().Path())
	}
	var l layoutRecord
	if err := decode(meta.Get(keyLayout), "the store's layout record", &l); err != nil {
		return err
	}
	if l.Layout > LayoutVersion {
		return fmt.Errorf("%w: %s has layout %d; this batchtune reads up to %d: upgrade batchtune", ErrSchemaTooNew, tx.DB().Path(), l.Layout, LayoutVersion)
	}
	if tx.Bucket(bucketStudies) == nil {
		return fmt.Errorf("%w: %s has no studies bucket", ErrCorrupt, tx.DB().Path())
	}
	return nil
}
