package search

import (
	"strconv"
	"strings"
)

// Assignment is one parameter's value in a configuration. For the derived
// parameter allowed_batch_sizes, Value is the choice's code (AllowedNone,
// AllowedPow2, ...).
type Assignment struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Config is one point of a space: an assignment per parameter, in the
// space's declared order. It is plain data, safe to store and compare; a
// Space turns it into what a server runs (Space.Batching, Space.Flags).
type Config []Assignment

// Get returns the value assigned to name.
func (c Config) Get(name string) (int64, bool) {
	for _, a := range c {
		if a.Name == name {
			return a.Value, true
		}
	}
	return 0, false
}

// Equal reports whether c and o assign the same values to the same names in
// the same order.
func (c Config) Equal(o Config) bool {
	if len(c) != len(o) {
		return false
	}
	for i := range c {
		if c[i] != o[i] {
			return false
		}
	}
	return true
}

// Key is a canonical string for c, usable as a map key; configurations with
// equal keys are Equal.
func (c Config) Key() string {
	var b strings.Builder
	for i, a := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.Name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(a.Value, 10))
	}
	return b.String()
}

// String writes c as name=value pairs, with allowed_batch_sizes by its
// choice name.
func (c Config) String() string {
	var b strings.Builder
	for i, a := range c {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.Name)
		b.WriteByte('=')
		if a.Name == AllowedBatchSizes && a.Value >= 0 && a.Value < int64(len(AllowedChoices)) {
			b.WriteString(AllowedChoices[a.Value])
			continue
		}
		b.WriteString(strconv.FormatInt(a.Value, 10))
	}
	return b.String()
}

// Clone returns a copy of c that shares no memory with it.
func (c Config) Clone() Config {
	if c == nil {
		return nil
	}
	return append(Config(nil), c...)
}
