package problem

import (
	"fmt"
	"strings"
)

// Problem is one invalid value, named by its field path
// (space.max_batch_size.values[2], allowed_batch_sizes[3]).
type Problem struct {
	Field string
	Msg   string
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// List is every problem found in one document, reported together. A nil
// or empty List is not an error: use Err to turn a collection into one.
type List []Problem

// Add records a problem at field.
func (ps *List) Add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Err returns ps as an error, or nil when there are none.
func (ps List) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

func (ps List) Error() string { return Render(ps) }

// Render renders one problem as its line, several as "N problems:" and
// one indented line each.
func Render[T fmt.Stringer](ps []T) string {
	if len(ps) == 1 {
		return ps[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(ps))
	for _, p := range ps {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}
