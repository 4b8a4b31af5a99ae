package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/batchtune/batchtune/store"
)

// Check opens the store at path read-only and runs bbolt's consistency
// check over it.
func Check(path string) error {
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Check(context.Background())
}

// Open opens a new store in t.TempDir(). When the test ends it is closed
// (a test may close it earlier) and bbolt's consistency check is run over
// the file; an inconsistency fails the test.
func Open(t testing.TB) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := store.Open(path, &store.Options{Command: "test " + t.Name()})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("storetest: close: %v", err)
		}
		if err := Check(path); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return db
}
