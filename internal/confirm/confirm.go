// Package confirm is the one home of the confirmation stage's rule: which
// configurations a search hands over to be re-measured, when a candidate's
// repeats make it eligible, which candidate leads, and which need another
// repeat before the verdict is settled. The tuner's stage (tuner/confirm.go)
// runs it on fresh restarts of a real server; the search benchmark
// (search/replay) runs it on a recorded surface's runs, so that what the
// benchmark reports a user is handed is what the tuner would hand them.
//
// The rule is the tuner's, unchanged: a candidate is eligible when its
// repeats met the SLO (every one of up to three, all but one in three
// beyond); candidates are ranked by the conservative end of their
// estimate's interval (the lower bound of a throughput, the upper of a
// latency), then by the mean; after the planned repeats, a candidate is
// re-measured while its SLO verdict is split and more repeats could still
// settle it, or while its interval overlaps the leader's. A study may ask
// for a stricter verdict on the SLO (confirmation.clean_repeats, Rule.Clean):
// no breach forgiven, and the leader re-measured until it has met the SLO
// that many times.
package confirm

import (
	"context"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/estimate"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// Tally is what one candidate's repeats so far say.
type Tally struct {
	// Samples are the objective of each repeat that measured something;
	// Feasible counts the repeats that met the SLO, of Repeats.
	Samples  []float64 `json:"samples"`
	Feasible int       `json:"feasible"`
	Repeats  int       `json:"repeats"`
	// Estimate summarises Samples (package estimate).
	Estimate estimate.Estimate `json:"estimate"`
	// Bound is the conservative estimate candidates are ranked by: the
	// lower confidence bound of the mean objective (the upper one when
	// smaller is better).
	Bound float64 `json:"bound"`
	// Strict: judged by a rule that forgives no breach of the SLO
	// (Rule.Clean); set with Estimate and Bound (Rule.Summarise). A
	// report stored before the field existed reads false, the rule it was
	// judged by.
	Strict bool `json:"strict,omitempty"`
}

// Eligible reports whether the repeats met the SLO: every one of up to
// three, all but one in three beyond (AllowedBreaches); every one when
// Strict.
func (t *Tally) Eligible() bool {
	allowed := AllowedBreaches(t.Repeats)
	if t.Strict {
		allowed = 0
	}
	return t.Repeats > 0 && t.Repeats-t.Feasible <= allowed
}

// AllowedBreaches is how many of n confirmation repeats may break the SLO
// for a configuration to stay eligible: none of up to three, then one in
// three. A real server has an unlucky restart now and then (a batching
// state that settles badly, a neighbour's burst); one such repeat among
// four or more says less about the configuration than the rest do. A
// stricter rule (Rule.Clean) forgives none.
func AllowedBreaches(n int) int { return max(n-1, 0) / 3 }

// Overlaps reports whether two estimates' intervals overlap, i.e. the
// repeats so far cannot tell which is better.
func Overlaps(a, b estimate.Estimate) bool {
	if !a.Bounded || !b.Bounded {
		return true
	}
	return a.Low <= b.High && b.Low <= a.High
}

// Rule is a study's confirmation settings.
type Rule struct {
	// Direction says which way the objective is better.
	Direction objective.Direction
	// Level is the confidence level of the estimates' intervals.
	Level float64
	// Repeats is how many times every candidate is measured; MaxRepeats
	// (at least Repeats) bounds the extra repeats of an undecided one.
	Repeats, MaxRepeats int
	// Clean, when above zero, is the stricter verdict on the SLO: no
	// breach is forgiven, and the leader is re-measured until it has met
	// the SLO in Clean repeats (or broken it, when the next one leads). A
	// configuration that breaks the SLO in one restart of three passes
	// three repeats 30% of the time, six 9%: at a tight SLO the
	// difference is the share of winners that truly break it.
	Clean int
}

// RuleOf is the rule of a study's confirmation settings, for an objective
// that goes in direction d.
func RuleOf(c configs.Confirmation, d objective.Direction) Rule {
	return Rule{Direction: d, Level: c.Confidence, Repeats: c.Repeats,
		MaxRepeats: max(c.MaxRepeats, c.Repeats), Clean: c.CleanRepeats}
}

// Rounds is the most rounds the stage takes with n entries: MaxRepeats
// (at least Repeats) under the default verdict, which ends there. Under
// Clean, enough for each leader in turn to reach its clean repeats when
// the one before broke the SLO late: no entry is measured beyond the
// larger of MaxRepeats and Clean, and a round that measures nobody ends
// the stage, so n times that bounds it.
func (r Rule) Rounds(n int) int {
	most := max(r.Repeats, r.MaxRepeats)
	if r.Clean == 0 {
		return most
	}
	return max(n, 1) * max(most, r.Clean)
}

// Summarise sets t's Estimate and Bound from its Samples, and whether it
// is judged Strict.
func (r Rule) Summarise(t *Tally) {
	t.Estimate = estimate.Of(t.Samples, r.Level)
	t.Bound = t.Estimate.Low
	if r.Direction == objective.Minimize {
		t.Bound = t.Estimate.High
	}
	t.Strict = r.Clean > 0
}

// Before reports whether a ranks before b: a better conservative bound,
// then a better mean.
func (r Rule) Before(a, b *Tally) bool {
	if a.Bound != b.Bound {
		return r.Direction.Better(a.Bound, b.Bound)
	}
	return r.Direction.Better(a.Estimate.Mean, b.Estimate.Mean)
}

// Leader is the index of the best eligible candidate by Before, or -1 when
// none is eligible.
func (r Rule) Leader(cands []*Tally) int {
	lead := -1
	for i, c := range cands {
		if c.Eligible() && (lead < 0 || r.Before(c, cands[lead])) {
			lead = i
		}
	}
	return lead
}

// Rivals lists the eligible candidates other than cands[lead] whose
// interval overlaps its own: those the repeats have not told apart from it.
func Rivals(cands []*Tally, lead int) []int {
	var out []int
	for i, c := range cands {
		if i != lead && c.Eligible() && Overlaps(cands[lead].Estimate, c.Estimate) {
			out = append(out, i)
		}
	}
	return out
}

// Need says why one entry needs another repeat; the zero Need means it
// does not.
type Need struct {
	// Split: its SLO verdict is split (some repeats met it, some did not)
	// and more repeats can still settle it either way.
	Split bool
	// Overlaps lists the candidates whose interval overlaps its own and
	// that it must be told apart from: the leader, for a rival of it;
	// every rival, for the leader.
	Overlaps []int
	// Short: it leads, and has met the SLO in fewer repeats than the
	// rule's Clean.
	Short bool
}

// Wanted reports whether the entry is to be measured again.
func (n Need) Wanted() bool { return n.Split || len(n.Overlaps) > 0 || n.Short }

// Next says who is measured in round (0-based), and why: everyone in the
// first Repeats rounds (with no Need: they are planned); after them each
// entry whose Need (Undecided) is not zero, and no one once nothing is
// undecided, which ends the stage. all[:cands] are the candidates; any
// entries after them (a baseline to state a gain against) are re-measured
// only for a split verdict, and never lead.
func (r Rule) Next(round int, all []*Tally, cands int) ([]bool, []Need) {
	want := make([]bool, len(all))
	if round < r.Repeats {
		for i := range want {
			want[i] = true
		}
		return want, make([]Need, len(all))
	}
	needs := r.Undecided(all, cands)
	for i, n := range needs {
		want[i] = n.Wanted()
	}
	return want, needs
}

// Undecided says which entries need another repeat, and why: a split SLO
// verdict that more repeats can still settle either way, or an interval
// that overlaps the leader's, so that the repeats so far cannot say which
// is better. Every such contender is re-measured, not only the runner-up
// by conservative bound: a candidate with the best mean and a wide
// interval from two repeats ranks low on its bound, and left alone there
// it would lose for want of repeats rather than on its figures. An entry
// at MaxRepeats is not re-measured for these. Under a stricter rule
// (Clean) the leader is also re-measured while it has met the SLO in
// fewer than Clean repeats. all[:cands] are the candidates; the entries
// after them only for a split verdict.
func (r Rule) Undecided(all []*Tally, cands int) []Need {
	maxRepeats := max(r.MaxRepeats, r.Repeats)
	needs := make([]Need, len(all))
	for i, c := range all {
		if c.Repeats >= maxRepeats {
			continue
		}
		breaches := c.Repeats - c.Feasible
		if breaches > 0 && r.Clean == 0 && breaches <= AllowedBreaches(maxRepeats) {
			needs[i].Split = true
		}
	}
	cs := all[:cands]
	lead := r.Leader(cs)
	if lead < 0 {
		return needs
	}
	needs[lead].Short = cs[lead].Repeats < r.Clean
	rivals := Rivals(cs, lead)
	for _, i := range rivals {
		if cs[i].Repeats < maxRepeats && !needs[i].Split {
			needs[i].Overlaps = []int{lead}
		}
	}
	if len(rivals) > 0 && cs[lead].Repeats < maxRepeats && !needs[lead].Split {
		needs[lead].Overlaps = rivals
	}
	return needs
}

// Candidate is a configuration handed to the confirmation stage.
type Candidate struct {
	Config search.Config
	// Trial indexes the search history's best feasible measurement of
	// Config, the one that made it a candidate; -1 for the seeds' recipe,
	// which is a candidate whatever the search measured.
	Trial int
}

// Candidates picks the confirmation stage's candidates from a search's
// history (req.History, req.Space, req.Objective, req.Seed): the first
// topK distinct configurations measured feasible, in the strategy's order
// (search.Rank: the Bayesian strategy reads each measurement against its
// neighbours, so that one lucky run near the SLO does not crowd out
// configurations that measured nearly as well and surely meet it), then
// the seeds' recipe when it is not among them and passes the space's
// rules. None when nothing measured feasible. The choice depends only on
// the history, so a resumed run picks the same.
func Candidates(ctx context.Context, st search.Strategy, req search.Request, topK int) ([]Candidate, error) {
	req.N = 1
	order, err := search.Rank(ctx, st, req)
	if err != nil {
		return nil, err
	}
	best := map[string]int{}
	for i, tr := range req.History {
		if tr.Outcome != search.Succeeded || !tr.Feasible || !tr.Measured {
			continue
		}
		k := tr.Config.Key()
		if j, ok := best[k]; !ok || req.Objective.Better(tr.Value, req.History[j].Value) {
			best[k] = i
		}
	}
	var out []Candidate
	seen := map[string]bool{}
	for _, c := range order {
		i, ok := best[c.Key()]
		if len(out) >= topK || !ok {
			continue
		}
		seen[c.Key()] = true
		out = append(out, Candidate{Config: c, Trial: i})
	}
	if len(out) == 0 {
		return nil, nil
	}
	if recipe := req.Space.Recipe(); !seen[recipe.Key()] && len(req.Space.Check(recipe)) == 0 {
		out = append(out, Candidate{Config: recipe, Trial: -1})
	}
	return out, nil
}
