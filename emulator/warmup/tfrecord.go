package warmup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// FileName is where a warmup file sits inside a model version directory.
const FileName = "assets.extra/tf_serving_warmup_requests"

// MaxRecord is the largest record Reader accepts (256 MiB), so that a
// corrupt length cannot make it allocate without bound.
const MaxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC-32C rotated right by 15 bits plus a
// constant, so that a CRC of data holding CRCs stays well distributed.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Writer writes TFRecord frames.
type Writer struct {
	w io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write appends one record.
func (w *Writer) Write(record []byte) error {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(record)))
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	var ftr [4]byte
	binary.LittleEndian.PutUint32(ftr[:], maskedCRC(record))
	for _, b := range [][]byte{hdr[:], record, ftr[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
	}
	return nil
}

// Reader reads TFRecord frames, checking both checksums.
type Reader struct {
	r   io.Reader
	n   int   // records read
	off int64 // offset of the next record
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next returns the next record, or io.EOF at a clean end of input. Errors
// name the record's index and byte offset.
func (r *Reader) Next() ([]byte, error) {
	var hdr [12]byte
	n, err := io.ReadFull(r.r, hdr[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.fail(ErrTruncated, "header: read %d of 12 bytes", n)
	}
	if maskedCRC(hdr[:8]) != binary.LittleEndian.Uint32(hdr[8:]) {
		return nil, r.fail(ErrCorrupt, "length checksum mismatch")
	}
	size := binary.LittleEndian.Uint64(hdr[:8])
	if size > MaxRecord {
		return nil, r.fail(ErrTooLarge, "%d bytes, limit %d", size, MaxRecord)
	}
	buf := make([]byte, size+4)
	if n, err := io.ReadFull(r.r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, r.fail(ErrTruncated, "data: read %d of %d bytes", n, len(buf))
		}
		return nil, fmt.Errorf("warmup: record %d: %w", r.n, err)
	}
	data := buf[:size]
	if maskedCRC(data) != binary.LittleEndian.Uint32(buf[size:]) {
		return nil, r.fail(ErrCorrupt, "data checksum mismatch")
	}
	r.n++
	r.off += int64(12 + len(buf))
	return data, nil
}

func (r *Reader) fail(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: record %d at byte %d: %s", sentinel, r.n, r.off, fmt.Sprintf(format, args...))
}
