package search

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/spatial/r1"
	"gonum.org/v1/gonum/stat/distmv"
	"gonum.org/v1/gonum/stat/samplemv"
)

// Random suggests configurations from a scrambled Halton sequence (Owen's
// randomisation, gonum's samplemv.Halton) laid over the discrete space: point
// u in the unit cube picks value floor(u_i × len(values_i)) of each
// parameter, so each parameter's values are covered evenly and the study
// seed picks the scrambling. Points that land on a finished or unrunnable
// configuration are skipped, so consecutive calls continue the same
// sequence. It has no settings.
type Random struct{}

var _ Strategy = (*Random)(nil)

// Name is "random".
func (*Random) Name() string { return "random" }

// Validate accepts every space: random search has no settings.
func (*Random) Validate(*Space) error { return nil }

// haltonSalt separates the Halton scrambling stream from other uses of the
// study seed.
const haltonSalt = 0x68616c746f6e

// maxHalton bounds how far along the sequence a call looks before falling
// back to enumerating what is left.
const maxHalton = 1 << 16

// Suggest returns the next req.N unfinished runnable points of the study's
// Halton sequence.
func (*Random) Suggest(ctx context.Context, req Request) ([]Suggestion, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	t := takenFrom(req.Space, req.History)
	pts, err := req.Space.halton(ctx, req.Seed, t, req.N)
	if err != nil {
		return nil, err
	}
	out := make([]Suggestion, len(pts))
	for i, idx := range pts {
		out[i] = Suggestion{Config: req.Space.configAt(idx), Reason: "quasi-random"}
	}
	return out, nil
}

// halton returns up to n runnable points not in t, in the order of the
// seed's scrambled Halton sequence, marking them in t. When the sequence
// stops finding new points (the space is nearly exhausted), the remaining
// runnable points are taken in a seeded random order instead.
func (s *Space) halton(ctx context.Context, seed uint64, t taken, n int) ([][]int, error) {
	var out [][]int
	m := 64
	for start := 0; len(out) < n && start < maxHalton; {
		m = min(2*m+4*n, maxHalton)
		u := haltonPoints(seed, m, s.Dims())
		for i := start; i < m && len(out) < n; i++ {
			if i&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			idx := s.cell(u.RawRowView(i))
			key := s.configAt(idx).Key()
			if t[key] || !s.isRunnable(idx) {
				continue
			}
			t[key] = true
			out = append(out, idx)
		}
		start = m
	}
	if len(out) == n {
		return out, nil
	}
	rest, err := s.unseenRunnable(ctx, t, -1)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, haltonSalt+1))
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, idx := range rest {
		if len(out) == n {
			break
		}
		t[s.configAt(idx).Key()] = true
		out = append(out, idx)
	}
	return out, nil
}

// haltonPoints returns the first m points of the seed's scrambled Halton
// sequence in d dimensions, one per row.
func haltonPoints(seed uint64, m, d int) *mat.Dense {
	u := mat.NewDense(m, d, nil)
	unit := make([]r1.Interval, d)
	for i := range unit {
		unit[i] = r1.Interval{Min: 0, Max: 1}
	}
	samplemv.Halton{
		Kind: samplemv.Owen,
		Q:    distmv.NewUniform(unit, nil),
		Src:  rand.NewPCG(seed, haltonSalt),
	}.Sample(u)
	return u
}

// cell maps a point of the unit cube to the value indexes it falls in.
func (s *Space) cell(u []float64) []int {
	idx := make([]int, len(u))
	for i, x := range u {
		k := len(s.params[i].Values)
		idx[i] = min(max(int(math.Floor(x*float64(k))), 0), k-1)
	}
	return idx
}

// nearestFree returns the runnable point not in t nearest to x in the unit
// cube (ties broken by grid order), or nil when none is left.
func (s *Space) nearestFree(ctx context.Context, x []float64, t taken) ([]int, error) {
	var best []int
	bestD := math.Inf(1)
	err := s.walk(ctx, func(idx []int) bool {
		if !s.separableOK(idx) {
			return true
		}
		d := sqDist(x, s.featuresAt(idx))
		if d >= bestD || t[s.configAt(idx).Key()] || !s.isRunnable(idx) {
			return true
		}
		best, bestD = slices.Clone(idx), d
		return true
	})
	return best, err
}

func sqDist(a, b []float64) float64 {
	var d float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
	}
	return d
}
