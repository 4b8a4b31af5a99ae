package tuner

import "fmt"

// noRecommendationDetail says why a run recommends nothing. When the
// baseline met the SLO in its confirmation repeats while no candidate
// did, the answer is to keep the baseline, not that nothing met the SLO
// (issue 15 item 14).
func noRecommendationDetail(conf *Confirmation) string {
	if conf != nil && len(conf.Candidates) > 0 && conf.Baseline.Eligible() {
		b := conf.Baseline
		d := fmt.Sprintf("keep the baseline: %s met the SLO in %d of %d confirmation repeats and no configuration tried did as reliably; nothing was exported",
			b.Label, b.Feasible, b.Repeats)
		if conf.Note != "" {
			d += " (" + conf.Note + ")"
		}
		return d
	}
	d := ErrNoFeasible.Error()
	if conf != nil && conf.Note != "" {
		d += ": " + conf.Note
	}
	return d
}
