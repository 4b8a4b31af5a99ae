package capacity

import (
	"errors"
	"fmt"
	"math"
)

// DefaultHeadroom is the share of a server's capacity that planning uses,
// leaving the rest for daily swings and failover (seed 001 §3.3: 0.65).
const DefaultHeadroom = 0.65

// Replicas is the number of servers that carry target requests per second
// when each is loaded to capacity × headroom: ceil(target / (capacity ×
// headroom)). capacity should be a lower bound (a confirmation interval's
// low end), so that the fleet is sized on what a server surely sustains.
func Replicas(target, capacity, headroom float64) (int, error) {
	switch {
	case !(target > 0) || math.IsInf(target, 0):
		return 0, fmt.Errorf("target rate must be > 0 req/s, got %g", target)
	case !(headroom > 0 && headroom <= 1):
		return 0, fmt.Errorf("headroom must be in (0, 1], got %g", headroom)
	case !(capacity > 0) || math.IsInf(capacity, 0):
		return 0, fmt.Errorf("capacity must be > 0 req/s, got %g", capacity)
	}
	// The epsilon keeps float rounding (100000 / (1000 × 0.5) computed as
	// 200.00000000001) from adding a server.
	x := target / (capacity * headroom)
	n := math.Ceil(x * (1 - 1e-12))
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("%g req/s at %g req/s per server needs over %d servers", target, capacity*headroom, math.MaxInt32)
	}
	return int(n), nil
}

// MinLowShare is the least share of its mean that a capacity interval's
// lower bound may be for a fleet to be planned on it. A fleet is sized on
// the lower bound, so an interval whose low end is under half its mean
// would more than double the servers on the strength of the measurement's
// spread alone, well beyond the 35% a planner leaves as headroom. It
// happens when a configuration is unsteady across restarts and
// confirmation stopped after few repeats: TF's defaults measured 210.7
// and 108.9 req/s on the stand-in ranker, and two repeats' 95% interval
// (t = 12.7) is 2.3 to 10 025 req/s, 67 216 servers for 100 000 req/s.
// Such a figure is not a plan: the interval says how few the repeats
// were, not what the server sustains.
const MinLowShare = 0.5

// ErrWideInterval says a capacity interval is too wide to plan on: its
// lower bound is under MinLowShare of its mean.
var ErrWideInterval = errors.New("capacity interval too wide to plan on")

// PlanningCapacity is the rate a fleet is planned on for a capacity
// measured as mean with interval [low, high] (high is only reported):
// low, or mean when there is no interval (one repeat: low is 0 or mean).
// An interval whose low end is under MinLowShare × mean is an error
// wrapping ErrWideInterval that gives the interval and what would resolve
// it; mean ≤ 0 (met the SLO at no rate) is an error too.
func PlanningCapacity(mean, low, high float64) (float64, error) {
	switch {
	case !(mean > 0) || math.IsInf(mean, 0):
		return 0, fmt.Errorf("capacity must be > 0 req/s, got %g", mean)
	case !(low > 0) || low >= mean:
		return mean, nil
	case low < MinLowShare*mean:
		return 0, fmt.Errorf("%w: %.1f req/s with interval [%.1f, %.1f], whose low end is %.0f%% of the mean (under %.0f%%); "+
			"more confirmation repeats (confirmation.repeats, confirmation.max_repeats) or a quieter host would narrow it",
			ErrWideInterval, mean, low, high, 100*low/mean, 100*MinLowShare)
	}
	return low, nil
}
