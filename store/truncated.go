package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's meta page, format version 2: a 16-byte page header, then magic,
// version, page size and flags (uint32 each), the root bucket (root page,
// sequence), the free list's page, the high-water page id, the
// transaction id and an FNV-64a checksum of the fields before it.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	metaOffMagic    = 16
	metaOffVersion  = 20
	metaOffPageSize = 24
	metaOffPgid     = 56
	metaOffTxid     = 64
	metaOffChecksum = 72
	metaEnd         = 80
)

// checkNotTruncated refuses a file shorter than the pages its newest valid
// meta page says it holds. bbolt maps the file and reads those pages
// without checking the file's length: past the end of its mapping the read
// is a memory fault, which kills the process (a fatal error, not a panic)
// unless the address happens to be mapped by something else. A file that
// lost its tail (a full disk, a copy cut short) is therefore turned away
// here, before bbolt maps it. A file whose metas are both invalid is left
// to bbolt, which reports it.
func checkNotTruncated(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // Open's own error says it better
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	head := make([]byte, metaEnd)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil // too short to be a bbolt file: bbolt says so
	}
	var best *boltMeta
	m0, ok := parseMeta(head)
	if ok {
		best = &m0
	}
	pageSize := int64(os.Getpagesize())
	if ok {
		pageSize = int64(m0.pageSize)
	}
	second := make([]byte, metaEnd)
	if _, err := f.ReadAt(second, pageSize); err == nil {
		if m1, ok := parseMeta(second); ok && (best == nil || m1.txid > best.txid) {
			best = &m1
		}
	}
	if best == nil {
		return nil
	}
	need := int64(best.pgid) * int64(best.pageSize)
	if fi.Size() < need {
		return corruptError(path, fmt.Sprintf("the file is %d bytes but its newest meta page (transaction %d) says it holds %d pages of %d bytes (%d bytes): it was truncated",
			fi.Size(), best.txid, best.pgid, best.pageSize, need))
	}
	return nil
}

type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// parseMeta reads the meta page at the start of p and reports whether its
// magic, version and checksum are bbolt's.
func parseMeta(p []byte) (boltMeta, bool) {
	le := binary.LittleEndian
	if len(p) < metaEnd || le.Uint32(p[metaOffMagic:]) != boltMagic || le.Uint32(p[metaOffVersion:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(p[metaOffMagic:metaOffChecksum])
	if h.Sum64() != le.Uint64(p[metaOffChecksum:]) {
		return boltMeta{}, false
	}
	m := boltMeta{pageSize: le.Uint32(p[metaOffPageSize:]), pgid: le.Uint64(p[metaOffPgid:]), txid: le.Uint64(p[metaOffTxid:])}
	if m.pageSize < 512 || m.pageSize > 1<<20 {
		return boltMeta{}, false
	}
	return m, true
}
