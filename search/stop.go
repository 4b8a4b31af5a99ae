package search

import (
	"fmt"

	"github.com/batchtune/batchtune/configs"
)

// StopRule decides when a study has seen enough: at the trial budget, or
// once the strategy has expected little for several trials in a row.
type StopRule struct {
	// Budget is the most trials to run (rejected and interrupted trials do
	// not count: they cost no measurement); 0 means no budget.
	Budget int
	// Patience is how many consecutive trials must each have been
	// suggested with Expected below MinImprovement; 0 disables the rule.
	Patience int
	// MinImprovement is the relative improvement (0.01 = 1%) below which an
	// expectation counts as small.
	MinImprovement float64
}

// DefaultStopRule stops after budget trials, or after 5 trials in a row
// that each expected less than 0.5% improvement.
func DefaultStopRule(budget int) StopRule {
	return StopRule{Budget: budget, Patience: 5, MinImprovement: 0.005}
}

// Validate reports every problem with r, under the field path search.stop.
func (r StopRule) Validate() error {
	var ps configs.Problems
	if r.Budget < 0 {
		ps.Add("search.stop.budget", "must not be negative, got %d", r.Budget)
	}
	if r.Patience < 0 {
		ps.Add("search.stop.patience", "must not be negative, got %d", r.Patience)
	}
	if r.Patience > 0 && !(r.MinImprovement > 0 && r.MinImprovement < 1) {
		ps.Add("search.stop.min_improvement", "must be in (0, 1) when patience is set, got %v", r.MinImprovement)
	}
	return ps.Err()
}

// Stop reports whether the study should stop after history, and why. The
// expectation rule needs a feasible trial (until one exists there is
// nothing to improve on) and looks at the last Patience trials that ran;
// a trial without an expectation (from a model-free strategy) resets it.
func (r StopRule) Stop(history []Trial) (bool, string) {
	ran := 0
	feasible := false
	for _, t := range history {
		if t.Outcome.ran() {
			ran++
		}
		if t.Outcome == Succeeded && t.Feasible {
			feasible = true
		}
	}
	if r.Budget > 0 && ran >= r.Budget {
		return true, fmt.Sprintf("trial budget reached (%d trials)", ran)
	}
	if r.Patience <= 0 || !feasible {
		return false, ""
	}
	small := 0
	for i := len(history) - 1; i >= 0 && small < r.Patience; i-- {
		t := history[i]
		if !t.Outcome.ran() {
			continue
		}
		if t.Expected == nil || *t.Expected >= r.MinImprovement {
			return false, ""
		}
		small++
	}
	if small < r.Patience {
		return false, ""
	}
	return true, fmt.Sprintf("the last %d trials each expected less than %.2g%% improvement", r.Patience, 100*r.MinImprovement)
}
