package warmup

import "errors"

var (
	// ErrCorrupt: a record's length or data does not match its checksum.
	ErrCorrupt = errors.New("warmup: corrupt record")
	// ErrTruncated: the file ends inside a record.
	ErrTruncated = errors.New("warmup: truncated record")
	// ErrNotPredict: a record is a PredictionLog of a kind other than
	// predict_log, which the stand-in cannot replay.
	ErrNotPredict = errors.New("warmup: record is not a predict_log")
	// ErrTooLarge: a record's length is beyond the reader's limit.
	ErrTooLarge = errors.New("warmup: record too large")
)
