package replay

import (
	"math"
	"slices"
)

// Alpha is the significance level at which Compare calls a difference in
// trials-to-target won or lost.
const Alpha = 0.05

// Verdict compares two settings' runs on one surface and target: how many
// trials each needed to first run a configuration within the target, per
// seed.
type Verdict struct {
	// Median and CI are each side's median over seeds and its sign-test
	// 95% interval (medianCI); +Inf where the median seed never reached
	// the target within the horizon.
	OldMedian, NewMedian float64
	OldCI, NewCI         [2]float64
	// P is the two-sided p-value of the Mann-Whitney test that the two
	// sides' trials-to-target come from one distribution (MannWhitney),
	// a seed that never reached the target counted as horizon + 1.
	P float64
	// Sign is +1 when the new side needs significantly fewer trials (P <
	// Alpha and its mean rank is lower), −1 when it needs significantly
	// more, 0 when the seeds cannot tell them apart.
	Sign int
}

// CompareReach compares old and new runs (from Bench, one strategy each,
// over the same or different seeds) on target index ti, with unreached
// targets counted as horizon + 1.
func CompareReach(old, new []Run, ti, horizon int) Verdict {
	a, b := reachValues(old, ti, horizon), reachValues(new, ti, horizon)
	var v Verdict
	v.OldMedian, v.NewMedian = unreachedInf(nearestRank(a, 0.5), horizon), unreachedInf(nearestRank(b, 0.5), horizon)
	lo, hi := medianCI(a, 0.95)
	v.OldCI = [2]float64{unreachedInf(lo, horizon), unreachedInf(hi, horizon)}
	lo, hi = medianCI(b, 0.95)
	v.NewCI = [2]float64{unreachedInf(lo, horizon), unreachedInf(hi, horizon)}
	var shift float64
	v.P, shift = MannWhitney(a, b)
	if v.P < Alpha {
		switch {
		case shift > 0:
			v.Sign = 1 // new ranks lower: fewer trials
		case shift < 0:
			v.Sign = -1
		}
	}
	return v
}

// ComparePicks compares what old and new runs' picks after the budget
// are worth, per seed (shares, PickShare: 0 for a truly infeasible pick or
// none), by the same test: Sign is +1 when the new side's picks are
// significantly better. The medians are shares, and CI is left zero.
func ComparePicks(old, new []float64) Verdict {
	v := Verdict{OldMedian: nearestRank(old, 0.5), NewMedian: nearestRank(new, 0.5)}
	var shift float64
	v.P, shift = MannWhitney(old, new)
	if v.P < Alpha {
		switch {
		case shift < 0:
			v.Sign = 1 // new ranks higher: better picks
		case shift > 0:
			v.Sign = -1
		}
	}
	return v
}

func reachValues(runs []Run, ti, horizon int) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = float64(horizon + 1)
		if ti < len(r.Reach) && r.Reach[ti] > 0 {
			out[i] = float64(r.Reach[ti])
		}
	}
	return out
}

func unreachedInf(v float64, horizon int) float64 {
	if v > float64(horizon) {
		return math.Inf(1)
	}
	return v
}

// MannWhitney is the two-sided Mann-Whitney U test of a against b (the
// Wilcoxon rank-sum test): p is the probability, were both drawn from one
// distribution, of a rank sum at least this far from its mean, by the
// normal approximation with mid-ranks for ties, the tie-corrected variance
// and a continuity correction. shift is the mean rank of b's values
// subtracted from a's over the pooled count: positive when a's values
// tend to be larger. Degenerate inputs (an empty side, every value tied)
// give p = 1.
func MannWhitney(a, b []float64) (p, shift float64) {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return 1, 0
	}
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	n := float64(n1 + n2)
	var rankA, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		mid := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].fromA {
				rankA += mid
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	u := rankA - float64(n1)*float64(n1+1)/2
	mu := float64(n1) * float64(n2) / 2
	sigma := math.Sqrt(float64(n1) * float64(n2) / 12 * ((n + 1) - ties/(n*(n-1))))
	shift = (rankA/float64(n1) - (n*(n+1)/2-rankA)/float64(n2)) / n
	if !(sigma > 0) {
		return 1, shift
	}
	z := math.Max(0, math.Abs(u-mu)-0.5) / sigma
	return math.Erfc(z / math.Sqrt2), shift
}

// Holm returns Holm's step-down adjustment of the p-values ps (in their
// order): a family of m comparisons, each called significant when its
// adjusted p is below the level, wrongly calls one or more of the true
// nulls significant with probability at most that level, whatever the
// comparisons' dependence. Sorted ascending, the i-th smallest (from 0)
// becomes the largest of (m − j)·p(j) over j ≤ i, capped at 1.
func Holm(ps []float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		switch {
		case ps[i] < ps[j]:
			return -1
		case ps[i] > ps[j]:
			return 1
		}
		return 0
	})
	out := make([]float64, m)
	running := 0.0
	for rank, i := range order {
		running = math.Max(running, math.Min(1, float64(m-rank)*ps[i]))
		out[i] = running
	}
	return out
}
