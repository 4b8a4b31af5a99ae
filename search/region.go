package search

import "math"

// The Bayesian strategy's local trust region (after TuRBO, Eriksson et al.
// 2019): most of the best configurations of a batching space sit in a
// small corner (right at the SLO, a batch size matched to the load), where
// a global model's expected improvement keeps being pulled away by the
// uncertainty of far, unexplored corners. Suggestions therefore come from
// a ball around the best trials unless the whole space offers clearly more.
// The ball's radius follows the search's progress, recomputed from the
// history on every call (the strategy keeps no state): it doubles after
// improvements and halves after a run of trials that improved nothing,
// and starts over when it has shrunk below one step.
const (
	regionCentres = 3    // the best trials (by posterior mean) the region surrounds
	regionOdds    = 10.0 // how much more the whole space must offer to leave the region
	radiusStart   = 0.4  // of the unit cube's scale (Euclidean over the parameters)
	radiusMin     = 0.1
	radiusMax     = 0.8
	// failedSizeOdds weighs down max_batch_sizes at or above one that
	// already failed to come up.
	failedSizeOdds = 0.05
)

// trustRadius replays the history: a feasible trial that beats the best
// feasible objective so far by over 1% is a success, anything else that
// ran is a failure; two successes double the radius, max(4, dims) failures
// in a row halve it, and a radius below radiusMin starts over.
func trustRadius(req Request) float64 {
	r := radiusStart
	best, have := 0.0, false
	succ, fail := 0, 0
	patience := max(4, req.Space.Dims())
	for _, tr := range req.History {
		if !tr.Outcome.ran() {
			continue
		}
		v, ok := 0.0, false
		if tr.Outcome == Succeeded && tr.Feasible && tr.Measured && tr.Value > 0 {
			v, ok = math.Log(tr.Value), true
			if req.Objective.Direction() == Minimize {
				v = -v
			}
		}
		switch {
		case ok && !have:
			best, have = v, true
			continue
		case ok && v > best+0.01:
			best = v
			succ++
			fail = 0
		default:
			fail++
			succ = 0
		}
		if succ >= 2 {
			r, succ = math.Min(2*r, radiusMax), 0
		}
		if fail >= patience {
			r, fail = r/2, 0
			if r < radiusMin {
				r = radiusStart
			}
		}
	}
	return r
}

// trustRegion marks the candidates within radius of any centre, measured
// over the parameters' own unit-cube positions (the first Dims inputs).
func trustRegion(s *Space, xs, centres [][]float64, radius float64) []bool {
	d := s.Dims()
	in := make([]bool, len(xs))
	r2 := radius * radius
	for j, x := range xs {
		for _, c := range centres {
			if sqDist(x[:d], c) <= r2 {
				in[j] = true
				break
			}
		}
	}
	return in
}
