package search

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
)

// TestRegistry: each declared strategy makes itself under its name, every
// setting it declares reaches the strategy, and configs learns the names
// and the default from here.
func TestRegistry(t *testing.T) {
	for _, spec := range Strategies() {
		if got := spec.make().Name(); got != spec.Name {
			t.Errorf("strategy %q makes one named %q", spec.Name, got)
		}
	}
	tests := []struct {
		name     string
		settings map[string]string
		want     Strategy
	}{
		// Every hill-climbing setting, each to its field.
		{"hillclimb", map[string]string{"radius": "1.5", "min_initialized": "4", "magnitude": "3"},
			&HillClimb{Radius: 1.5, MinInitialized: 4, Magnitude: 3}},
		// Every Bayesian setting, each to its field.
		{"bayes", map[string]string{"init": "7", "candidates": "512", "xi": "0.05", "prior_strength": "-1", "fit_max": "32"},
			&Bayes{Init: 7, Candidates: 512, Xi: 0.05, PriorStrength: -1, FitMax: 32}},
		// No settings: the zero (default) strategy.
		{"grid", nil, &Grid{}},
	}
	for _, tt := range tests {
		got, err := New(tt.name, tt.settings)
		if err != nil {
			t.Fatalf("New(%s): %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Bayes{})); diff != "" {
			t.Errorf("New(%s) (-want +got):\n%s", tt.name, diff)
		}
	}
	// An unknown setting is named with the known ones, in declared order.
	_, err := New("hillclimb", map[string]string{"radius": "x", "step": "1"})
	for _, want := range []string{`search.settings.radius: must be a number, got "x"`, "search.settings.step: unknown setting; known: radius, min_initialized, magnitude"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad settings: got %v, want %q", err, want)
		}
	}

	if got := configs.DefaultStudy().Search.Strategy; got != DefaultStrategy {
		t.Errorf("configs' default strategy %q, want %q", got, DefaultStrategy)
	}
	if _, ok := lookup(DefaultStrategy); !ok {
		t.Errorf("the default strategy %q is not declared", DefaultStrategy)
	}
	s := configs.DefaultStudy()
	s.Name, s.Target.Model.Name, s.SLO.Latency = "x", "m", configs.Duration(1e8)
	s.Search.Strategy = "anneal"
	err = s.Validate()
	if err == nil || !strings.Contains(err.Error(), `search.strategy: must be one of grid, random, hillclimb, bayes, got "anneal"`) {
		t.Errorf("configs' check of an unknown strategy: %v", err)
	}
}

// TestBayesOptInSettings: each opt-in Bayes setting a benchmark variant
// names reaches the strategy, and a value out of range is refused naming
// its field.
func TestBayesOptInSettings(t *testing.T) {
	for _, tc := range []struct {
		name, good, bad string
		got             func(*Bayes) float64
		want            float64
	}{
		{"feasibility_weight", "0.5", "-1", func(b *Bayes) float64 { return b.FeasibilityWeight }, 0.5},
		{"output_floor", "0.25", "1", func(b *Bayes) float64 { return b.OutputFloor }, 0.25},
		{"hedge", "10", "-1", func(b *Bayes) float64 { return float64(b.Hedge) }, 10},
		{"lengthscale_prior", "1", "2", func(b *Bayes) float64 { return float64(b.LengthscalePrior) }, 1},
		{"fill", "-1", "2", func(b *Bayes) float64 { return float64(b.Fill) }, -1},
		{"little", "1", "2", func(b *Bayes) float64 { return float64(b.Little) }, 1},
		{"explore", "4", "-1", func(b *Bayes) float64 { return float64(b.Explore) }, 4},
		{"bracket", "-1", "2", func(b *Bayes) float64 { return float64(b.Bracket) }, -1},
		{"fillable", "1", "2", func(b *Bayes) float64 { return float64(b.Fillable) }, 1},
		{"burst_starts", "2", "3", func(b *Bayes) float64 { return float64(b.BurstStarts) }, 2},
		{"auto_cores", "5", "6", func(b *Bayes) float64 { return float64(b.AutoCores) }, 5},
		{"ranked", "-1", "-2", func(b *Bayes) float64 { return float64(b.Ranked) }, -1},
		{"local_fill", "4", "5", func(b *Bayes) float64 { return float64(b.LocalFill) }, 4},
		{"fit_defaults", "1", "2", func(b *Bayes) float64 { return float64(b.FitDefaults) }, 1},
		{"trend", "1", "2", func(b *Bayes) float64 { return float64(b.Trend) }, 1},
		{"warp", "1", "2", func(b *Bayes) float64 { return float64(b.Warp) }, 1},
		{"race", "1", "2", func(b *Bayes) float64 { return float64(b.Race) }, 1},
		{"thompson", "1", "2", func(b *Bayes) float64 { return float64(b.Thompson) }, 1},
		{"additive", "1", "2", func(b *Bayes) float64 { return float64(b.Additive) }, 1},
		{"infeasible_cap", "-1", "3", func(b *Bayes) float64 { return float64(b.InfeasibleCap) }, -1},
		{"queue_input", "1", "2", func(b *Bayes) float64 { return float64(b.QueueInput) }, 1},
	} {
		st, err := New("bayes", map[string]string{tc.name: tc.good})
		if err != nil {
			t.Fatalf("%s %s: %v", tc.name, tc.good, err)
		}
		if b, ok := st.(*Bayes); !ok || tc.got(b) != tc.want {
			t.Errorf("%s %s: got %#v, want a Bayes with it at %v", tc.name, tc.good, st, tc.want)
		}
		st, err = New("bayes", map[string]string{tc.name: tc.bad})
		if err == nil {
			err = st.Validate(nil)
		}
		if err == nil || !strings.Contains(err.Error(), "search.settings."+tc.name) {
			t.Errorf("%s %s: got %v, want refused naming the field", tc.name, tc.bad, err)
		}
	}
}
