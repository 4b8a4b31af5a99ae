package search

import (
	"cmp"
	"context"
	"slices"
)

// A Ranker orders the configurations a history measured feasible by its
// own models rather than by the measurements alone. The best measurement
// of a search is the likeliest to be a lucky one (the winner's curse): of
// many configurations near the SLO, the one whose single run came out
// best is often truly over the SLO (on the ranker design surface, for 29
// seeds in 30; experiments/search-bench). A model fitted to the whole
// history reads each measurement against its neighbours.
type Ranker interface {
	// Rank returns every distinct configuration that measured feasible in
	// req.History (req.N is ignored), the most promising first.
	Rank(ctx context.Context, req Request) ([]Config, error)
}

// Rank orders the distinct configurations measured feasible in
// req.History, the most promising first: by the strategy's models when it
// is a Ranker, else by their best measured objective. The tuner's
// confirmation stage re-measures the first few; the search benchmark's
// pick is the first.
func Rank(ctx context.Context, st Strategy, req Request) ([]Config, error) {
	if r, ok := st.(Ranker); ok {
		return r.Rank(ctx, req)
	}
	return MeasuredOrder(req.Objective, req.History), nil
}

// MeasuredOrder lists the distinct configurations measured feasible in
// hist by their best measured objective, best first; ties keep the
// history's order.
func MeasuredOrder(o Objective, hist []Trial) []Config {
	best := map[string]int{} // config key → index of its best trial
	var keys []string
	for i, tr := range hist {
		if tr.Outcome != Succeeded || !tr.Measured || !tr.Feasible {
			continue
		}
		k := tr.Config.Key()
		j, seen := best[k]
		if !seen {
			keys = append(keys, k)
		}
		if !seen || o.Better(tr.Value, hist[j].Value) {
			best[k] = i
		}
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		va, vb := hist[best[a]].Value, hist[best[b]].Value
		switch {
		case o.Better(va, vb):
			return -1
		case o.Better(vb, va):
			return 1
		}
		return 0
	})
	out := make([]Config, len(keys))
	for i, k := range keys {
		out[i] = hist[best[k]].Config
	}
	return out
}

// Rank orders the configurations measured feasible by the models fitted
// to the whole history: first those whose posterior constraint margin is
// negative (the model's best guess is that they meet the SLO), then the
// rest, each group by the objective model's posterior mean. A posterior
// mean at a measured point is its measurement shrunk towards what its
// neighbours measured, by as much as the learned noise says a single
// measurement deserves. With fewer than three measured trials, or Ranked
// -1, the measurements decide (MeasuredOrder). The models rank on the data
// as measured (InfeasibleCap -1): clamping an infeasible trial's objective
// steers where the search looks, but a posterior mean here estimates what
// a measured configuration serves, and a neighbour over the SLO that
// served more is evidence about it.
func (b *Bayes) Rank(ctx context.Context, req Request) ([]Config, error) {
	return b.rankWith(ctx, req, -1)
}

// rankWith is Rank with the objective data entered as clamp says
// (InfeasibleCap's values).
func (b *Bayes) rankWith(ctx context.Context, req Request, clamp int) ([]Config, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if err := b.Validate(req.Space); err != nil {
		return nil, err
	}
	order := MeasuredOrder(req.Objective, req.History)
	st := b.settings()
	obs := b.observeWith(req, clamp)
	if b.Ranked < 0 || len(order) < 2 || len(obs.fx) < 3 {
		return order, nil
	}
	prior := b.gpPrior(len(obs.fx[0]))
	xs := make([][]float64, len(order))
	for i, c := range order {
		x, ok := b.inputs(req.Space, c)
		if !ok {
			return order, nil // not a point of the space: nothing to model
		}
		xs[i] = x
	}
	fgp, err := fitGP(ctx, obs.fx, obs.fy, st.fitMax, prior)
	if err != nil {
		return nil, err
	}
	mean := fgp.predict(xs).mu
	meets := make([]bool, len(order))
	for i := range meets {
		meets[i] = true
	}
	if len(obs.cx) >= 2 {
		cgp, err := fitGP(ctx, obs.cx, obs.cy, st.fitMax, prior)
		if err != nil {
			return nil, err
		}
		for i, m := range cgp.predict(xs).mu {
			meets[i] = m*cgp.std+cgp.mean < 0
		}
	}
	idx := make([]int, len(order))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if meets[a] != meets[b] {
			if meets[a] {
				return -1
			}
			return 1
		}
		return cmp.Compare(mean[b], mean[a])
	})
	out := make([]Config, len(order))
	for i, j := range idx {
		out[i] = order[j]
	}
	return out, nil
}
