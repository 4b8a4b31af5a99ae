package tuner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/confirm"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Candidate is one configuration in the confirmation stage, with its fresh
// measurements.
type Candidate struct {
	// Label says where it came from: "trial 12" (a search trial), "seed
	// recipe", or "baseline (tf-defaults)".
	Label  string        `json:"label"`
	Config []store.Param `json:"config"`
	// SearchObjective is what the search stage measured: the figure that
	// made it a candidate, biased upward by having been picked as best.
	SearchObjective *float64 `json:"search_objective,omitempty"`
	// Tally is what the confirmation repeats measured (samples, how many
	// met the SLO, the estimate and the bound candidates are ranked by),
	// by the rule of package confirm.
	confirm.Tally
	// Means over the repeats of the server's own figures: the why.
	P99        time.Duration `json:"p99_ns"`
	MeanBatch  float64       `json:"mean_batch"`
	QueueShare float64       `json:"queue_share"`
	// Reasons lists why repeats failed or broke the SLO.
	Reasons []string `json:"reasons,omitempty"`
	// Floors counts the repeats whose capacity is only a lower bound
	// (capacity.Result.Floor: the load generator could not offer more).
	Floors int `json:"floors,omitempty"`

	role   string
	launch runtime.Config
}

// Confirmation is the confirmation stage's verdict.
type Confirmation struct {
	Candidates []Candidate `json:"candidates"`
	Baseline   Candidate   `json:"baseline"`
	// Winner indexes Candidates; nil when none was feasible in every repeat.
	Winner *int `json:"winner,omitempty"`
	// Gain of the winner over the baseline, nil when the baseline measured
	// nothing to compare with.
	Gain *Gain `json:"gain,omitempty"`
	// Why explains the winner from the server's metrics; Note says what
	// limits the verdict (an infeasible baseline, too few repeats).
	Why  string `json:"why,omitempty"`
	Note string `json:"note,omitempty"`
}

// WinnerCandidate returns the winner, or nil.
func (c *Confirmation) WinnerCandidate() *Candidate {
	if c == nil || c.Winner == nil {
		return nil
	}
	return &c.Candidates[*c.Winner]
}

// candidates picks the confirmation stage's candidates from the search
// trials by confirm.Candidates (the top-k distinct configurations measured
// feasible, in the strategy's order, then the seeds' recipe), each
// labelled by its best search trial. The choice depends only on the
// stored trials, so a resumed run picks the same.
func (t *Tuner) candidates(ctx context.Context, trials []store.Trial) ([]Candidate, error) {
	var searched []store.Trial
	for _, tr := range trials {
		if tr.Role == store.RoleSearch {
			searched = append(searched, tr)
		}
	}
	picked, err := confirm.Candidates(ctx, t.strategy, search.Request{
		Space: t.space, Objective: t.objective, History: history(searched), Seed: uint64(t.study.Search.Seed),
	}, t.study.Confirmation.TopK)
	if err != nil {
		return nil, fmt.Errorf("rank the search's trials: %w", err)
	}
	var out []Candidate
	for _, p := range picked {
		if p.Trial < 0 {
			out = append(out, Candidate{Label: "seed recipe", Config: params(p.Config), role: store.RoleConfirm, launch: t.launch(p.Config)})
			continue
		}
		// Each configuration is labelled by its best search trial.
		tr := searched[p.Trial]
		obj := *tr.Objective
		out = append(out, Candidate{Label: fmt.Sprintf("trial %d", tr.Seq), Config: tr.Config, SearchObjective: &obj,
			role: store.RoleConfirm, launch: t.launch(configOf(tr.Config))})
	}
	return out, nil
}

// confirmStage re-measures the candidates and the baseline on fresh
// restarts and picks the winner by its conservative estimate.
func (t *Tuner) confirmStage(ctx context.Context, run *store.Run, trials []store.Trial) (*Confirmation, []store.Trial, error) {
	cands, err := t.candidates(ctx, onFirstNode(trials))
	if err != nil {
		return nil, trials, err
	}
	if len(cands) == 0 {
		return &Confirmation{Note: "no search trial met the SLO; nothing to confirm"}, trials, nil
	}
	base := Candidate{Label: "baseline (" + t.baseline.label + ")", Config: t.baseline.params, role: store.RoleBaseline, launch: t.baseline.launch}
	return t.confirm(ctx, run, trials, cands, base)
}

// confirm measures cands and base study.confirmation.repeats times each on
// fresh restarts, round-robin with the order rotated every round so that
// drift over time hits them all alike, then ranks the candidates by their
// conservative estimate and states the winner's gain over base. Trials of
// the run already finished in a candidate's role and configuration count
// as its first repeats (a resumed run, or a warm start's re-measurement).
func (t *Tuner) confirm(ctx context.Context, run *store.Run, trials []store.Trial, cands []Candidate, base Candidate) (*Confirmation, []store.Trial, error) {
	s := t.study
	conf := &Confirmation{}
	all := append(append([]Candidate(nil), cands...), base)
	repeats := s.Confirmation.Repeats
	total := repeats * len(all)

	key := func(c *Candidate) string { return c.role + "/" + configOf(c.Config).Key() }
	done := map[string]int{}
	for _, tr := range trials {
		if counted(&tr) {
			done[tr.Role+"/"+configOf(tr.Config).Key()]++
		}
	}
	finished := 0
	for i := range all {
		finished += min(done[key(&all[i])], repeats)
	}
	rule := t.rule()
	msg := fmt.Sprintf("confirming %d candidate(s) against %s, %d repeats each (up to %d where the verdict is split)", len(cands), base.Label, repeats, max(rule.MaxRepeats, repeats))
	if rule.Clean > 0 {
		msg += fmt.Sprintf("; the winner must meet the SLO in %d repeats, breaking it in none", rule.Clean)
	}
	t.observe(Event{Time: t.now(), Run: run.ID, Stage: StageConfirm, Total: total, Message: msg})
	level := s.Confirmation.Confidence
	for r := range rule.Rounds(len(all)) {
		// The first rounds measure everyone; later ones only those whose
		// verdict more repeats can still change.
		if r >= repeats {
			t.tally(all, trials)
		}
		want, needs := rule.Next(r, tallies(all), len(all)-1)
		why := reasons(all, needs, rule.Clean)
		if r >= repeats {
			if !slices.Contains(want, true) {
				break
			}
			for i := range all {
				if want[i] && done[key(&all[i])] <= r {
					total++
				}
			}
		}
		for i := range all {
			j := (i + r) % len(all)
			c := &all[j]
			if !want[j] || done[key(c)] > r {
				continue
			}
			if t.stopping(ctx) {
				return nil, trials, ErrInterrupted
			}
			note := fmt.Sprintf("confirm %s, repeat %d of %d", c.Label, r+1, repeats)
			if r >= repeats {
				note = fmt.Sprintf("confirm %s, extra repeat %d (%s)", c.Label, r+1, why[j])
			}
			tr := store.Trial{Study: s.Name, Run: run.ID, Role: c.role, Config: c.Config, State: store.TrialSuggested, Why: note}
			st := stage{name: StageConfirm, index: finished + 1, total: total}
			if err := t.put(ctx, &tr, st, true); err != nil {
				return nil, trials, err
			}
			err := t.measureRepeat(ctx, &tr, c.launch, st, &trials)
			trials = append(trials, tr)
			if err != nil {
				return nil, trials, err
			}
			done[key(c)]++
			finished++
		}
	}
	t.tally(all, trials)
	cands, base = all[:len(all)-1], all[len(all)-1]
	conf.Candidates, conf.Baseline = cands, base
	if i := t.leader(cands); i >= 0 {
		conf.Winner = &i
	}
	w := conf.WinnerCandidate()
	if w == nil {
		var why []string
		for i := range cands {
			c := &cands[i]
			why = append(why, fmt.Sprintf("%s met it in %d of %d repeats (%s)", c.Label, c.Feasible, c.Repeats, firstReason(c.Reasons)))
		}
		conf.Note = "no candidate met the SLO in enough confirmation repeats: " + strings.Join(why, "; ")
		return conf, trials, nil
	}
	// A gain is only stated against a baseline that met the SLO: the
	// throughput of a configuration that breaks it is not one anybody can
	// serve at, and comparing with it would mislead either way.
	var notes []string
	switch {
	case base.Eligible():
		g := gain(w.Samples, base.Samples, t.maximize(), level)
		conf.Gain = &g
	case len(base.Samples) > 0:
		notes = append(notes, "the baseline itself broke the SLO ("+firstReason(base.Reasons)+"), so no gain over it is stated")
	default:
		notes = append(notes, "the baseline measured nothing to compare with ("+firstReason(base.Reasons)+")")
	}
	if repeats < 2 {
		notes = append(notes, "one repeat per candidate gives no confidence interval")
	}
	// A winner by a hair: say so, so that nobody reads the ranking as a
	// difference the repeats did not show.
	var ties []string
	for _, i := range confirm.Rivals(tallies(cands), *conf.Winner) {
		ties = append(ties, cands[i].Label)
	}
	if len(ties) > 0 {
		notes = append(notes, fmt.Sprintf("%s is not told apart from %s: their confidence intervals overlap; it ranks first on its %s bound, and either serves about as well",
			w.Label, strings.Join(ties, " or "), boundName(t.maximize())))
	}
	// A capacity the load generator capped is the client's limit, not the
	// server's: the ranking may then be the client's too.
	for _, c := range append(slices.Clone(cands), base) {
		if c.Floors > 0 {
			notes = append(notes, fmt.Sprintf("%s's capacity is only a lower bound in %d of %d repeats (the load generator could not offer a higher rate), so the server may sustain more than stated",
				c.Label, c.Floors, c.Repeats))
		}
	}
	conf.Note = strings.Join(notes, "; ")
	conf.Why = t.why(w, &base)
	return conf, trials, nil
}

// counted reports whether a confirmation trial counts as one of its
// candidate's repeats: it ended, and not for an infrastructure reason
// (infra.go), which says nothing about the configuration.
func counted(tr *store.Trial) bool {
	return tr.State.Terminal() && tr.State != store.TrialInterrupted && !infraFailure(tr)
}

// tally recomputes every candidate's figures from the stage's trials.
func (t *Tuner) tally(all []Candidate, trials []store.Trial) {
	for i := range all {
		c := &all[i]
		c.Repeats, c.Feasible, c.Samples, c.Reasons, c.Floors = 0, 0, nil, nil, 0
		var p99, batch, queue float64
		n := 0
		for _, tr := range trials {
			if tr.Role != c.role || configOf(tr.Config).Key() != configOf(c.Config).Key() || !counted(&tr) {
				continue
			}
			c.Repeats++
			if tr.State == store.TrialSucceeded && tr.Feasible {
				c.Feasible++
			} else if tr.Reason != "" {
				c.Reasons = append(c.Reasons, fmt.Sprintf("trial %d %s: %s", tr.Seq, tr.State, tr.Reason))
			}
			if tr.Objective != nil && tr.State != store.TrialInvalid {
				if tr.Capacity != nil && tr.Capacity.Floor() {
					c.Floors++
				}
				c.Samples = append(c.Samples, *tr.Objective)
				p99 += float64(tr.Summary.P99)
				batch += tr.Summary.MeanBatch
				queue += tr.Summary.QueueShare
				n++
			}
		}
		c.P99, c.MeanBatch, c.QueueShare = 0, 0, 0
		if n > 0 {
			c.P99 = time.Duration(p99 / float64(n))
			c.MeanBatch, c.QueueShare = batch/float64(n), queue/float64(n)
		}
		t.rule().Summarise(&c.Tally)
	}
}

// rule is the study's confirmation rule (package confirm).
func (t *Tuner) rule() confirm.Rule {
	return confirm.RuleOf(t.study.Confirmation, t.objective.Direction())
}

// tallies points at each candidate's tally, in order.
func tallies(cs []Candidate) []*confirm.Tally {
	out := make([]*confirm.Tally, len(cs))
	for i := range cs {
		out[i] = &cs[i].Tally
	}
	return out
}

// reasons words why each of all is measured again (needs from
// confirm.Rule.Next, under a rule whose Clean is clean; "" for a planned
// repeat or none).
func reasons(all []Candidate, needs []confirm.Need, clean int) []string {
	why := make([]string, len(all))
	for i, n := range needs {
		c := &all[i]
		switch {
		case n.Split:
			why[i] = fmt.Sprintf("met the SLO in %d of %d repeats", c.Feasible, c.Repeats)
		case len(n.Overlaps) > 0:
			var labels []string
			for _, j := range n.Overlaps {
				labels = append(labels, all[j].Label)
			}
			why[i] = fmt.Sprintf("its interval overlaps %s's", strings.Join(labels, "'s and "))
		case n.Short:
			why[i] = fmt.Sprintf("it leads, and has met the SLO in %d of the %d repeats a winner needs", c.Feasible, clean)
		}
	}
	return why
}

// leader is the index of the best eligible candidate, or -1 when none is
// eligible.
func (t *Tuner) leader(cands []Candidate) int { return t.rule().Leader(tallies(cands)) }

// why explains the winner from TF Serving's own metrics, against the baseline.
func (t *Tuner) why(w, base *Candidate) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%s: %s", w.Label, t.describeObjective(w)))
	if w.MeanBatch > 0 {
		s := fmt.Sprintf("mean batch %.1f", w.MeanBatch)
		if base.MeanBatch > 0 {
			s += fmt.Sprintf(" vs %.1f for the baseline", base.MeanBatch)
		}
		parts = append(parts, s)
	}
	if w.QueueShare > 0 || base.QueueShare > 0 {
		s := fmt.Sprintf("queueing %.0f%% of server latency", 100*w.QueueShare)
		if base.Repeats > 0 {
			s += fmt.Sprintf(" vs %.0f%%", 100*base.QueueShare)
		}
		parts = append(parts, s)
	}
	if w.P99 > 0 {
		s := fmt.Sprintf("%s %s", qname(t.study.SLO.Quantile), w.P99.Round(time.Microsecond))
		if base.P99 > 0 {
			s += fmt.Sprintf(" vs %s", base.P99.Round(time.Microsecond))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (t *Tuner) describeObjective(c *Candidate) string {
	if t.maximize() {
		return fmt.Sprintf("%.1f req/s (lower bound %.1f)", c.Estimate.Mean, c.Bound)
	}
	return fmt.Sprintf("%s %s (upper bound %s)", qname(t.study.SLO.Quantile), secs(c.Estimate.Mean), secs(c.Bound))
}

func secs(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(time.Microsecond).String()
}

// recommend makes the winner the run's recommendation; accepted says
// whether it is to replace the study's incumbent. It is stored with the
// run's end (store.DB.FinishRun), not here.
func (t *Tuner) recommend(ctx context.Context, run *store.Run, conf *Confirmation, accepted bool) (*store.Recommendation, error) {
	w := conf.WinnerCandidate()
	cfg := configOf(w.Config)
	rec := &store.Recommendation{
		Study:     t.study.Name,
		Run:       run.ID,
		Time:      t.now().UTC(),
		Config:    w.Config,
		Batching:  string(configs.EncodeBatching(t.space.Batching(cfg))),
		Flags:     t.ExportFlags(cfg),
		Objective: w.Estimate.Mean,
		Baseline:  conf.Baseline.Label,
		Accepted:  accepted,
		Note:      conf.Why,
	}
	if g := conf.Gain; g != nil {
		rec.Gain, rec.GainLow, rec.GainHigh, rec.Confidence = g.Rel, g.Low, g.High, g.Conf
	}
	if t.objective.Kind == objective.MaxCapacity {
		rec.Capacity, rec.CapacityLow, rec.CapacityHigh = w.Estimate.Mean, w.Estimate.Low, w.Estimate.High
		rec.CapacityRepeats, rec.CapacityFloors = w.Repeats, w.Floors
		rec.Confidence = t.study.Confirmation.Confidence
		for i := range conf.Candidates {
			if i != *conf.Winner {
				rec.Capacities = append(rec.Capacities, capacityOf(&conf.Candidates[i]))
			}
		}
		rec.Capacities = append(rec.Capacities, capacityOf(&conf.Baseline))
	}
	if conf.Note != "" {
		rec.Note += " (" + conf.Note + ")"
	}
	return rec, nil
}

// capacityOf is a confirmed candidate's capacity for planning: 0 when no
// repeat met the SLO at any rate.
func capacityOf(c *Candidate) store.CapacityEstimate {
	return store.CapacityEstimate{Label: c.Label, Config: c.Config, Capacity: c.Estimate.Mean,
		Low: c.Estimate.Low, High: c.Estimate.High, Repeats: c.Repeats, Feasible: c.Feasible, Floors: c.Floors}
}

func firstReason(rs []string) string {
	if len(rs) == 0 {
		return "no reason recorded"
	}
	return rs[0]
}

func (t *Tuner) maximize() bool { return t.objective.Direction() == search.Maximize }

func boundName(maximize bool) string {
	if maximize {
		return "lower"
	}
	return "upper"
}
