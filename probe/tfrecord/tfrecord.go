package tfrecord

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const maskDelta = 0xa282ead8

// MaskedCRC returns TFRecord's masked CRC-32C of b.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + maskDelta
}

// DefaultMaxRecord bounds the length a Reader accepts for one record unless
// told otherwise: a corrupt length field must not make it allocate gigabytes.
const DefaultMaxRecord = 1 << 30

// RecordError says which record of the input was bad and why. Its Err is
// one of the package's sentinels.
type RecordError struct {
	Index  int   // 0-based record number
	Offset int64 // byte offset of the record's header
	Part   string
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record %d (byte offset %d): %s: %v", e.Index, e.Offset, e.Part, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Reader reads records one at a time. It is not safe for concurrent use.
type Reader struct {
	r      *bufio.Reader
	index  int
	offset int64
	// MaxRecord is the largest length accepted; DefaultMaxRecord when 0.
	MaxRecord uint64
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReader(r)}
}

// Next returns the next record's data, or io.EOF after the last complete
// record. Any other error is a *RecordError. The returned slice is newly
// allocated and owned by the caller.
func (r *Reader) Next() ([]byte, error) {
	var hdr [12]byte
	start := r.offset
	n, err := io.ReadFull(r.r, hdr[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.fail(start, fmt.Sprintf("header (%d of 12 bytes)", n), ErrTruncated)
	}
	length := binary.LittleEndian.Uint64(hdr[:8])
	if got, want := binary.LittleEndian.Uint32(hdr[8:]), MaskedCRC(hdr[:8]); got != want {
		return nil, r.fail(start, fmt.Sprintf("length CRC stored %#08x, computed %#08x", got, want), ErrChecksum)
	}
	limit := r.MaxRecord
	if limit == 0 {
		limit = DefaultMaxRecord
	}
	if length > limit {
		return nil, r.fail(start, fmt.Sprintf("length %d over limit %d", length, limit), ErrTooLarge)
	}
	data := make([]byte, length)
	if n, err := io.ReadFull(r.r, data); err != nil {
		return nil, r.fail(start, fmt.Sprintf("data (%d of %d bytes)", n, length), ErrTruncated)
	}
	var foot [4]byte
	if n, err := io.ReadFull(r.r, foot[:]); err != nil {
		return nil, r.fail(start, fmt.Sprintf("data CRC (%d of 4 bytes)", n), ErrTruncated)
	}
	if got, want := binary.LittleEndian.Uint32(foot[:]), MaskedCRC(data); got != want {
		return nil, r.fail(start, fmt.Sprintf("data CRC stored %#08x, computed %#08x", got, want), ErrChecksum)
	}
	r.offset += 16 + int64(length)
	r.index++
	return data, nil
}

func (r *Reader) fail(start int64, part string, err error) error {
	return &RecordError{Index: r.index, Offset: start, Part: part, Err: err}
}

// ReadAll returns every record of r, or the first error other than io.EOF.
func ReadAll(r io.Reader) ([][]byte, error) {
	rd := NewReader(r)
	var out [][]byte
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// Writer frames records onto an io.Writer.
type Writer struct {
	w io.Writer
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write appends one record holding data.
func (w *Writer) Write(data []byte) error {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(hdr[8:], MaskedCRC(hdr[:8]))
	var foot [4]byte
	binary.LittleEndian.PutUint32(foot[:], MaskedCRC(data))
	for _, b := range [][]byte{hdr[:], data, foot[:]} {
		if _, err := w.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
