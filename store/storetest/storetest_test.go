package storetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

func TestOpenAndCheck(t *testing.T) {
	db := storetest.Open(t)
	if err := db.PutStudy(context.Background(), &store.Study{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Check(db.Path()); err != nil {
		t.Errorf("check of a sound store while its writer is open: %v", err)
	}
	// A test may close the store itself; the cleanup still checks it.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Check(filepath.Join(t.TempDir(), "none.db")); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("check of a missing store: got %v, want ErrNotExist", err)
	}
}
