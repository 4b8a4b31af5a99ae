package store_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/batchtune/batchtune/store"
)

// rewrite changes one value of a closed store with bbolt directly, the way
// a newer batchtune would have written it.
func rewrite(t *testing.T, path string, bucketPath []string, key, value []byte) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucketPath[0]))
		for _, name := range bucketPath[1:] {
			bk = bk.Bucket([]byte(name))
		}
		return bk.Put(key, value)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// TestSchemaTooNew: a store whose layout, or one of whose records, comes
// from a newer batchtune is refused with a clear error, not half-read.
func TestSchemaTooNew(t *testing.T) {
	dir := t.TempDir()

	// A record of a newer version: the call reading it fails, naming it.
	path := filepath.Join(dir, "record.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(t, db, "s")
	addTrial(t, db, r, store.TrialSucceeded, 4)
	db.Close()
	rewrite(t, path, []string{"studies", "s", "runs", string(seqKey(r.ID)), "trials"}, seqKey(1),
		[]byte(`{"schema":2,"study":"s","run":1,"seq":1,"state":"succeeded","new_field":{"x":1}}`))
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Trials(ctx, "s", r.ID)
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "trial 1 of run 1 of study s has record version 2; this batchtune reads up to 1") {
		t.Errorf("reading a newer trial: got %v", err)
	}
	// Other records still read.
	if _, err := db.Runs(ctx, "s"); err != nil {
		t.Errorf("runs beside a newer trial: %v", err)
	}

	// A newer layout: the whole store is refused at Open.
	path2 := filepath.Join(dir, "layout.db")
	db2, err := store.Open(path2, nil)
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
	rewrite(t, path2, []string{"meta"}, []byte("layout"), []byte(`{"schema":1,"layout":7}`))
	for _, ro := range []bool{false, true} {
		_, err := store.Open(path2, &store.Options{ReadOnly: ro})
		if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "has layout 7; this batchtune reads up to 1: upgrade batchtune") {
			t.Errorf("open (read-only %v) of a newer layout: got %v", ro, err)
		}
	}

	// A value that is not a record at all.
	path3 := filepath.Join(dir, "corrupt.db")
	db3, err := store.Open(path3, nil)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, db3, "s")
	db3.Close()
	rewrite(t, path3, []string{"studies", "s"}, []byte("study"), []byte("garbage"))
	db3, err = store.Open(path3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if _, err := db3.Study(ctx, "s"); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("reading garbage: got %v, want ErrCorrupt", err)
	}
}

// TestNotAStore: a bbolt file that batchtune did not write is refused.
func TestNotAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("studies"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := store.Open(path, nil); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("got %v, want ErrCorrupt", err)
	}
}
