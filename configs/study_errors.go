package configs

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/batchtune/batchtune/internal/problem"
)

// ErrInvalidStudy matches (errors.Is) every StudyProblems: a study file that
// decoded but holds invalid values, unknown keys or broken syntax.
var ErrInvalidStudy = errors.New("configs: invalid study")

// StudyProblem is a Problem in a study file, located by its line (0 when
// the field was not written and has no written parent).
type StudyProblem struct {
	File string
	Line int
	Problem
}

// String reads "study.yaml:14: load.concurrency: must be >= 1, got 0".
func (p StudyProblem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// StudyProblems is every problem found in one study, in the order of the
// document's lines.
type StudyProblems []StudyProblem

// Err returns ps as an error, or nil when there are none.
func (ps StudyProblems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	ps.sort()
	return ps
}

func (ps StudyProblems) Error() string { return problem.Render(ps) }

// Is makes errors.Is(err, ErrInvalidStudy) true for every StudyProblems.
func (ps StudyProblems) Is(target error) bool { return target == ErrInvalidStudy }

// sort orders problems by file and line, keeping the order of problems on
// one line (the order they were found in).
func (ps StudyProblems) sort() {
	slices.SortStableFunc(ps, func(a, b StudyProblem) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}

func asProblems(err error, out *Problems) bool { return errors.As(err, out) }

func asStudyProblems(err error, out *StudyProblems) bool { return errors.As(err, out) }
