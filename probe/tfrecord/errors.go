package tfrecord

import "errors"

// Sentinel errors. Reader wraps them in a *RecordError that names the record.
var (
	// ErrChecksum means a stored CRC does not match the bytes it covers.
	ErrChecksum = errors.New("tfrecord: checksum mismatch")
	// ErrTruncated means the input ended inside a record.
	ErrTruncated = errors.New("tfrecord: truncated record")
	// ErrTooLarge means a record's length field exceeds the reader's limit.
	ErrTooLarge = errors.New("tfrecord: record too large")
)
