package store_test

import (
	"errors"
	"testing"

	"github.com/batchtune/batchtune/store"
)

// TestCorruptionUnderAnOpenWriter: the daemon's case, a writer whose file
// is corrupted while it is open. bbolt panics inside its Open (loading the
// free list); the lock must not stay held by this process.
func TestCorruptionUnderAnOpenWriter(t *testing.T) {
	path := storeFile(t)
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	flipPageFlags(t, path)
	if _, err := db.StudyTrials(ctx, "b"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("read: %v, want store: corrupt", err)
	}
	if !unlocked(t, path) {
		t.Error("the file is still locked after the corrupt read")
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "d", SpecHash: "h"}); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("write after: %v, want the same corrupt error", err)
	}
}
