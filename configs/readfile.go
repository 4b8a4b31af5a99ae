package configs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Size limits of the files batchtune reads. Reading is bounded so that a
// study naming /dev/zero, a FIFO or a huge file cannot exhaust memory or
// block the daemon's start and reload.
const (
	MaxStudyBytes    = 1 << 20   // a study file
	MaxBatchingBytes = 64 << 10  // a batching.config
	MaxRequestBytes  = 64 << 20  // load.payload.request_file
	MaxWarmupBytes   = 512 << 20 // load.payload.warmup_file
)

// ErrFileTooBig and ErrNotRegular are ReadFile's refusals.
var (
	ErrFileTooBig = errors.New("file too big")
	ErrNotRegular = errors.New("not a regular file")
)

// OpenFile opens path for reading when it is a regular file of at most
// limit bytes: a FIFO, a device (/dev/zero), a socket or a directory is
// refused without blocking. The reader it returns fails with
// ErrFileTooBig should the file grow past limit while it is read.
func OpenFile(path string, limit int64) (io.ReadCloser, error) {
	// O_NONBLOCK: opening a FIFO with no writer would wait for ever.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, fmt.Errorf("%s: %w (a directory)", path, ErrNotRegular)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileKind(fi.Mode()))
	case fi.Size() > limit:
		f.Close()
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrFileTooBig, fi.Size(), limit)
	}
	return &boundedFile{f: f, path: path, left: limit + 1, limit: limit}, nil
}

// ReadFile is os.ReadFile bounded as OpenFile is.
func ReadFile(path string, limit int64) ([]byte, error) {
	r, err := OpenFile(path, limit)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

type boundedFile struct {
	f     *os.File
	path  string
	left  int64
	limit int64
}

func (b *boundedFile) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%s: %w: it grew past %d bytes while read", b.path, ErrFileTooBig, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.f.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		return n, fmt.Errorf("%s: %w: it grew past %d bytes while read", b.path, ErrFileTooBig, b.limit)
	}
	return n, err
}

func (b *boundedFile) Close() error { return b.f.Close() }

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
