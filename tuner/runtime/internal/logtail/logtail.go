package logtail

import (
	"strings"
	"sync"
)

// Ring is an io.Writer that keeps the last Size bytes written to it. It is
// safe for concurrent use: a server's stdout and stderr may share one.
type Ring struct {
	mu    sync.Mutex
	buf   []byte
	next  int  // where the next byte goes
	full  bool // buf has wrapped at least once
	total int64
}

// New returns a Ring keeping the last size bytes (at least 1).
func New(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{buf: make([]byte, size)}
}

// Write keeps the last len(buf) bytes of p and never fails.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.total += int64(n)
	if n >= len(r.buf) {
		copy(r.buf, p[n-len(r.buf):])
		r.next, r.full = 0, true
		return n, nil
	}
	c := copy(r.buf[r.next:], p)
	if c < n {
		copy(r.buf, p[c:])
		r.full = true
	}
	r.next = (r.next + n) % len(r.buf)
	if r.next == 0 && n > 0 {
		r.full = true
	}
	return n, nil
}

// Bytes returns a copy of what the ring holds, oldest first.
func (r *Ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.next]...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Tail returns at most n of the last lines held, without a trailing
// newline. When the ring has overwritten bytes, the first, partial line is
// dropped unless it is all there is.
func (r *Ring) Tail(n int) string {
	r.mu.Lock()
	wrapped := r.full
	r.mu.Unlock()
	s := strings.TrimRight(string(r.Bytes()), "\n")
	if wrapped {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	if n <= 0 || s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Written is how many bytes were ever written.
func (r *Ring) Written() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}
