package search

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchtune/batchtune/configs"
)

// Strategy proposes the next configurations to run (katib's suggestion
// contract). A Strategy holds no state between calls: everything it knows
// comes in the Request, so a restarted tuner rebuilds it from the store, and
// the same request yields the same suggestions.
//
// Every implementation guarantees, for any request it accepts: suggestions
// are points of the space that pass Space.Check; none repeats a finished
// trial's configuration (every outcome but Interrupted) or another
// suggestion of the same call; fewer than N come back only when the space
// has no other runnable configuration left. Implementations are safe for
// concurrent use. Re-measuring a configuration (to confirm a winner) is
// not a strategy's job: the tuner's confirmation step does it. The one
// exception is opt-in and bounded: Bayes with Recheck runs one known start
// a second time in its initial design, when that start's one run missed
// the SLO narrowly and would otherwise decide where the search goes.
type Strategy interface {
	// Name is the strategy's name as a study spells it (grid, random,
	// hillclimb, bayes).
	Name() string
	// Validate checks the strategy's own settings against a space, every
	// problem reported together.
	Validate(space *Space) error
	// Suggest returns up to req.N configurations to run next.
	Suggest(ctx context.Context, req Request) ([]Suggestion, error)
}

// Request is everything a strategy may base its suggestions on.
type Request struct {
	Space     *Space
	Objective Objective
	// History is every trial of the study so far, in the order they were
	// suggested, including rejected and failed ones.
	History []Trial
	// N is how many suggestions are wanted (trials to run in parallel).
	N int
	// Seed seeds every random choice; it should be the study's seed.
	Seed uint64
}

// Suggestion is one configuration to run.
type Suggestion struct {
	Config Config
	// Expected is the relative improvement over the best feasible trial the
	// strategy expects from this configuration (expected improvement ×
	// probability of feasibility, on a log scale, so 0.02 reads "about 2%
	// better"). nil when the strategy has no model (grid, random,
	// hill-climb) or no feasible trial exists yet. The tuner stores it in
	// Trial.Expected for StopRule.
	Expected *float64
	// Reason says in a word or two why it was chosen (grid order,
	// quasi-random, tf-defaults-nearest: TF's defaults snapped to the
	// space, not the baseline row, which is TF's defaults themselves;
	// recipe, neighbourhood, step, restart, expected-improvement,
	// feasibility).
	Reason string
}

// settingParser reads string settings, collecting problems.
type settingParser struct {
	raw  map[string]string
	used []string
	ps   configs.Problems
}

func (p *settingParser) get(key string) (string, bool) {
	p.used = append(p.used, key)
	v, ok := p.raw[key]
	return v, ok
}

func (p *settingParser) int(key string, def int) int {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.ps.Add("search.settings."+key, "must be an integer, got %q", v)
		return def
	}
	return n
}

func (p *settingParser) float(key string, def float64) float64 {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		p.ps.Add("search.settings."+key, "must be a number, got %q", v)
		return def
	}
	return f
}

// unknown reports settings the strategy does not read, in sorted order so
// the message is stable.
func (p *settingParser) unknown() {
	var keys []string
	for k := range p.raw {
		if !slices.Contains(p.used, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	known := "none"
	if len(p.used) > 0 {
		known = strings.Join(p.used, ", ")
	}
	for _, k := range keys {
		p.ps.Add("search.settings."+k, "unknown setting; known: %s", known)
	}
}

// checkRequest validates what every strategy needs from a request.
func checkRequest(req Request) error {
	if req.Space == nil {
		return fmt.Errorf("%w: no space", ErrBadRequest)
	}
	if req.N < 1 {
		return fmt.Errorf("%w: n must be at least 1, got %d", ErrBadRequest, req.N)
	}
	if err := req.Objective.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// taken is the set of configurations a call must not suggest: finished
// trials and the call's own picks.
type taken map[string]bool

func takenFrom(s *Space, history []Trial) taken {
	t := taken{}
	for _, tr := range history {
		if tr.Outcome.finished() {
			t[s.canonical(tr.Config).Key()] = true
		}
	}
	return t
}

// canonical returns c with its assignments in the space's declared order
// when it names exactly the space's parameters (a stored configuration may
// list them in another order), else c unchanged.
func (s *Space) canonical(c Config) Config {
	if len(c) != len(s.params) {
		return c
	}
	inOrder := true
	for i, a := range c {
		if a.Name != s.params[i].Name {
			inOrder = false
			break
		}
	}
	if inOrder {
		return c
	}
	out := make(Config, len(c))
	for _, a := range c {
		i, ok := s.byName[a.Name]
		if !ok || out[i].Name != "" {
			return c
		}
		out[i] = a
	}
	return out
}

// walk calls fn with the index vector of every point of the space in grid
// order (the last declared parameter varies fastest) until fn returns false.
// The slice passed to fn is reused between calls.
func (s *Space) walk(ctx context.Context, fn func(idx []int) bool) error {
	idx := make([]int, len(s.params))
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !fn(idx) {
			return nil
		}
		i := len(idx) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(s.params[i].Values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

// unseenRunnable lists every runnable point of the space not in t, in grid
// order, stopping after limit points (limit < 0: no limit).
func (s *Space) unseenRunnable(ctx context.Context, t taken, limit int) ([][]int, error) {
	var out [][]int
	err := s.walk(ctx, func(idx []int) bool {
		if limit >= 0 && len(out) >= limit {
			return false
		}
		if s.isRunnable(idx) && !t[s.configAt(idx).Key()] {
			out = append(out, slices.Clone(idx))
		}
		return true
	})
	return out, err
}

func (s *Space) separableOK(idx []int) bool {
	for i, j := range idx {
		if !s.params[i].ok[j] {
			return false
		}
	}
	return true
}

// features places a configuration in the unit cube of the space's metric,
// one coordinate per parameter. Values outside the space (from an earlier
// study) land outside [0, 1]. ok is false when c does not assign every
// parameter or names a choice the space does not have.
func (s *Space) features(c Config) ([]float64, bool) {
	x := make([]float64, len(s.params))
	for i := range s.params {
		p := &s.params[i]
		v, ok := c.Get(p.Name)
		if !ok {
			return nil, false
		}
		if j, ok := p.index[v]; ok {
			x[i] = p.pos[j]
			continue
		}
		if p.info.kind == derivedChoice {
			return nil, false
		}
		x[i] = s.position(i, v)
	}
	return x, true
}

func (s *Space) featuresAt(idx []int) []float64 {
	x := make([]float64, len(idx))
	for i, j := range idx {
		x[i] = s.params[i].pos[j]
	}
	return x
}
