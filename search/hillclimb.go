package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/batchtune/batchtune/configs"
)

// HillClimb is Model Analyzer's quick search, over every dimension of the
// space and without hidden state. Coordinates are value indexes. Around a
// home point it first measures MinInitialized neighbours within Radius,
// choosing ones that cover values not yet seen in each dimension; then it
// steps from the unweighted centre of the measured neighbours towards their
// objective-weighted centre, Magnitude times that vector. Where Model
// Analyzer stops when a step goes nowhere, HillClimb continues best-first:
// home is the best measured point whose neighbourhood still has unvisited
// points (feasible trials by objective, then infeasible ones by how nearly
// they met the constraints); when every neighbourhood is exhausted it
// restarts at the next point of the study's Halton sequence. It starts from
// the seeds' recipe (Space.Recipe).
//
// Defaults follow Model Analyzer's quick search (radius 2, step magnitude
// 2), except that the measured points a neighbourhood needs before a step
// scale with the dimensions (Model Analyzer's 3 was for its 2–3).
type HillClimb struct {
	// Radius of the neighbourhood in value-index steps (Euclidean);
	// default 2.
	Radius float64
	// MinInitialized is how many measured points a neighbourhood needs
	// before a step is taken; default the number of parameters + 1, so
	// that each dimension can be varied once first.
	MinInitialized int
	// Magnitude scales the step vector; default 2.
	Magnitude float64
}

var _ Strategy = (*HillClimb)(nil)

// Name is "hillclimb".
func (*HillClimb) Name() string { return "hillclimb" }

func (h *HillClimb) settings(dims int) (radius float64, minInit int, magnitude float64) {
	radius, minInit, magnitude = h.Radius, h.MinInitialized, h.Magnitude
	if radius == 0 {
		radius = 2
	}
	if minInit == 0 {
		minInit = dims + 1
	}
	if magnitude == 0 {
		magnitude = 2
	}
	return radius, minInit, magnitude
}

// Validate checks the settings.
func (h *HillClimb) Validate(*Space) error {
	var ps configs.Problems
	if h.Radius < 0 || h.Radius > 4 || math.IsNaN(h.Radius) {
		ps.Add("search.settings.radius", "must be in (0, 4] (0 for the default 2), got %v", h.Radius)
	}
	if h.MinInitialized < 0 {
		ps.Add("search.settings.min_initialized", "must not be negative, got %d", h.MinInitialized)
	}
	if h.Magnitude < 0 || math.IsNaN(h.Magnitude) || math.IsInf(h.Magnitude, 0) {
		ps.Add("search.settings.magnitude", "must be positive (0 for the default 2), got %v", h.Magnitude)
	}
	return ps.Err()
}

// climbPoint is a measured point of the space with its score.
type climbPoint struct {
	idx    []int
	key    string
	order  int     // position in the history
	weight float64 // objective weight for the step: > 0 only when feasible
	rank   float64 // larger is better: objective for feasible, -margin otherwise
	feas   bool
}

// Suggest returns req.N points: neighbourhood fills, steps or restarts.
func (h *HillClimb) Suggest(ctx context.Context, req Request) ([]Suggestion, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if err := h.Validate(req.Space); err != nil {
		return nil, err
	}
	s := req.Space
	radius, minInit, magnitude := h.settings(s.Dims())
	t := takenFrom(req.Space, req.History)
	pts := h.measured(s, req)

	var out []Suggestion
	pick := func(idx []int, why string) {
		t[s.configAt(idx).Key()] = true
		out = append(out, Suggestion{Config: s.configAt(idx), Reason: why})
	}
	var picked [][]int
	for len(out) < req.N {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(pts) == 0 && len(picked) == 0 {
			start, err := h.start(ctx, s, t)
			if err != nil {
				return nil, err
			}
			if start == nil {
				break
			}
			pick(start, "start (recipe)")
			picked = append(picked, start)
			continue
		}
		idx, why := h.next(s, pts, picked, t, radius, minInit, magnitude)
		if idx == nil {
			more, err := s.halton(ctx, req.Seed, t, 1)
			if err != nil {
				return nil, err
			}
			if len(more) == 0 {
				break
			}
			idx, why = more[0], "restart"
		}
		pick(idx, why)
		picked = append(picked, idx)
	}
	return out, nil
}

// start is the recipe, or the free runnable point nearest to it.
func (h *HillClimb) start(ctx context.Context, s *Space, t taken) ([]int, error) {
	rec := s.Recipe()
	if idx, ok := s.indexOf(rec); ok && !t[rec.Key()] && s.isRunnable(idx) {
		return idx, nil
	}
	x, _ := s.features(rec)
	return s.nearestFree(ctx, x, t)
}

// measured collects the history's trials that ran on points of the space,
// best first. A configuration measured more than once keeps its latest
// trial.
func (h *HillClimb) measured(s *Space, req Request) []climbPoint {
	byKey := map[string]int{}
	var pts []climbPoint
	for i, tr := range req.History {
		if !tr.Outcome.ran() || tr.Outcome == Invalid {
			continue
		}
		c := s.canonical(tr.Config)
		idx, ok := s.indexOf(c)
		if !ok {
			continue
		}
		p := climbPoint{idx: idx, key: c.Key(), order: i}
		p.rank, p.weight, p.feas = climbRank(req.Objective, s.rules.SLO, tr)
		if j, ok := byKey[p.key]; ok {
			pts[j] = p
			continue
		}
		byKey[p.key] = len(pts)
		pts = append(pts, p)
	}
	slices.SortStableFunc(pts, func(a, b climbPoint) int {
		if c := cmp.Compare(b.rank, a.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	return pts
}

// climbRank is how hill-climbing orders the trials that ran, larger
// better: a measured feasible trial by its log objective (weight, the
// objective with larger better, > 0 only then), every other one below all
// of those by how nearly it met the constraints.
func climbRank(o Objective, slo time.Duration, tr Trial) (rank, weight float64, feas bool) {
	m, _ := margin(o, slo, tr)
	rank = -m - 10 // infeasible ranks below every feasible point
	if tr.Outcome == Succeeded && tr.Feasible && tr.Measured && tr.Value > 0 {
		weight = tr.Value
		if o.Direction() == Minimize {
			weight = 1 / tr.Value
		}
		return math.Log(weight), weight, true
	}
	return rank, 0, false
}

// next picks one point by the quick-search rules, or nil when every
// measured point's neighbourhood is exhausted.
func (h *HillClimb) next(s *Space, pts []climbPoint, picked [][]int, t taken, radius float64, minInit int, magnitude float64) ([]int, string) {
	// Measured points first, best first; then this call's pending picks
	// (the start, a restart), whose neighbourhoods are grown before
	// restarting again.
	homes := make([][]int, 0, len(pts)+len(picked))
	for _, p := range pts {
		homes = append(homes, p.idx)
	}
	homes = append(homes, picked...)
	for _, home := range homes {
		nb := s.neighbourhood(home, radius)
		var free [][]int
		for _, idx := range nb {
			if !t[s.configAt(idx).Key()] && s.isRunnable(idx) {
				free = append(free, idx)
			}
		}
		if len(free) == 0 {
			continue
		}
		var in []climbPoint
		for _, p := range pts {
			if indexDist(p.idx, home) <= radius*radius {
				in = append(in, p)
			}
		}
		if len(in) < minInit {
			return coverMost(s, home, free, in, picked), "neighbourhood"
		}
		target := stepFrom(s, home, in, magnitude)
		if slices.Equal(target, home) {
			// No direction to go: learn about the least-covered values.
			return coverMost(s, home, free, in, picked), "neighbourhood"
		}
		if k := s.configAt(target).Key(); !t[k] && s.isRunnable(target) {
			return target, "step"
		}
		return nearestIdx(free, target), "towards step"
	}
	return nil, ""
}

// neighbourhood lists the points within radius of home (index distance),
// home included, in grid order.
func (s *Space) neighbourhood(home []int, radius float64) [][]int {
	r := int(math.Floor(radius))
	var out [][]int
	cur := make([]int, len(home))
	var rec func(i int, d2 float64)
	rec = func(i int, d2 float64) {
		if i == len(home) {
			out = append(out, slices.Clone(cur))
			return
		}
		for off := -r; off <= r; off++ {
			v := home[i] + off
			nd := d2 + float64(off*off)
			if v < 0 || v >= len(s.params[i].Values) || nd > radius*radius {
				continue
			}
			cur[i] = v
			rec(i+1, nd)
		}
	}
	rec(0, 0)
	return out
}

func indexDist(a, b []int) float64 {
	var d float64
	for i := range a {
		d += float64((a[i] - b[i]) * (a[i] - b[i]))
	}
	return d
}

// coverMost returns the free neighbour whose values are least covered by the
// neighbourhood's measured and pending points (Model Analyzer's
// initialisation rule), nearest home on ties.
func coverMost(s *Space, home []int, free [][]int, in []climbPoint, picked [][]int) []int {
	covered := make([]map[int]bool, len(home))
	for i := range covered {
		covered[i] = map[int]bool{}
	}
	mark := func(idx []int) {
		for i, v := range idx {
			covered[i][v] = true
		}
	}
	for _, p := range in {
		mark(p.idx)
	}
	for _, p := range picked {
		if indexDist(p, home) <= 16 {
			mark(p)
		}
	}
	best, bestN, bestD := free[0], -1, math.Inf(1)
	for _, idx := range free {
		n := 0
		for i, v := range idx {
			if !covered[i][v] {
				n++
			}
		}
		d := indexDist(idx, home)
		if n > bestN || (n == bestN && d < bestD) {
			best, bestN, bestD = idx, n, d
		}
	}
	return best
}

// stepFrom moves home along the vector from the measured neighbours'
// centre to their objective-weighted centre, times magnitude, rounded and
// clamped to the space.
func stepFrom(s *Space, home []int, in []climbPoint, magnitude float64) []int {
	d := len(home)
	centre, weighted := make([]float64, d), make([]float64, d)
	var wsum float64
	for _, p := range in {
		wsum += p.weight
	}
	for _, p := range in {
		for i, v := range p.idx {
			centre[i] += float64(v) / float64(len(in))
			if wsum > 0 {
				weighted[i] += float64(v) * p.weight / wsum
			}
		}
	}
	out := make([]int, d)
	for i := range out {
		step := 0.0
		if wsum > 0 {
			step = (weighted[i] - centre[i]) * magnitude
		}
		v := int(math.Round(float64(home[i]) + step))
		out[i] = min(max(v, 0), len(s.params[i].Values)-1)
	}
	return out
}

// nearestIdx returns the point of pts nearest target in index space (first
// in grid order on ties).
func nearestIdx(pts [][]int, target []int) []int {
	best, bestD := pts[0], math.Inf(1)
	for _, p := range pts {
		if d := indexDist(p, target); d < bestD {
			best, bestD = p, d
		}
	}
	return best
}

func (h *HillClimb) String() string {
	min := "dims+1"
	if h.MinInitialized > 0 {
		min = fmt.Sprint(h.MinInitialized)
	}
	r, _, g := h.settings(0)
	return fmt.Sprintf("hillclimb(radius=%g, min_initialized=%s, magnitude=%g)", r, min, g)
}
