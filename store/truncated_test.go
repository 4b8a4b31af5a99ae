package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMetaOfAHealthyStore: both meta pages of a store bbolt wrote parse,
// the newer one names pages that the file holds, and the check passes; a
// file with a damaged magic is left to bbolt (no verdict here).
func TestMetaOfAHealthyStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := db.PutStudy(t.Context(), &Study{Name: "s" + string(rune('a'+i)), SpecHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, ok0 := parseMeta(data)
	if !ok0 {
		t.Fatal("meta page 0 did not parse")
	}
	m1, ok1 := parseMeta(data[m0.pageSize:])
	if !ok1 {
		t.Fatal("meta page 1 did not parse")
	}
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	if newest.txid < 3 || newest.pgid < 4 || int64(newest.pgid)*int64(newest.pageSize) > int64(len(data)) {
		t.Fatalf("newest meta %+v for a %d-byte file after 3 writes", newest, len(data))
	}
	if err := checkNotTruncated(path); err != nil {
		t.Fatalf("a healthy store: %v", err)
	}

	data[metaOffMagic] ^= 0xff
	data[int(m0.pageSize)+metaOffMagic] ^= 0xff
	if err := os.WriteFile(path, data[:8192], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkNotTruncated(path); err != nil {
		t.Fatalf("metas without bbolt's magic: %v, want no verdict (bbolt reports it)", err)
	}
}
