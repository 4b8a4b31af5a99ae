package search

import (
	"fmt"
	"strings"

	"github.com/batchtune/batchtune/configs"
)

// DefaultStrategy is the strategy of a study that names none.
const DefaultStrategy = "bayes"

// StrategySpec declares one strategy a study can name: the strategy's
// search.strategy value, its settings (search.settings), and how to make
// it. registry is the one list of them: New, Names, configs' validation
// of search.strategy and the reference study's documentation all read it,
// so a new strategy is one new entry there.
type StrategySpec struct {
	Name string
	// Settings are the settings the strategy reads, in the order they are
	// listed in messages; any other setting is an error.
	Settings []Setting
	// make returns the strategy with every setting at its default (zero).
	make func() Strategy
}

// Setting is one of a strategy's settings. Exactly one of setInt and
// setFloat is set: an integer setting or a number.
type Setting struct {
	Name     string
	setInt   func(Strategy, int)
	setFloat func(Strategy, float64)
}

// Kind is "integer" or "number".
func (s Setting) Kind() string {
	if s.setInt != nil {
		return "integer"
	}
	return "number"
}

func intSetting[S Strategy](name string, set func(S, int)) Setting {
	return Setting{Name: name, setInt: func(s Strategy, v int) { set(s.(S), v) }}
}

func floatSetting[S Strategy](name string, set func(S, float64)) Setting {
	return Setting{Name: name, setFloat: func(s Strategy, v float64) { set(s.(S), v) }}
}

// registry holds the strategies New knows, in the order Names lists them.
// Each setting's default and meaning are documented on the strategy's
// field it sets.
var registry = []StrategySpec{
	{Name: "grid", make: func() Strategy { return &Grid{} }},
	{Name: "random", make: func() Strategy { return &Random{} }},
	{Name: "hillclimb", make: func() Strategy { return &HillClimb{} }, Settings: []Setting{
		floatSetting("radius", func(h *HillClimb, v float64) { h.Radius = v }),
		intSetting("min_initialized", func(h *HillClimb, v int) { h.MinInitialized = v }),
		floatSetting("magnitude", func(h *HillClimb, v float64) { h.Magnitude = v }),
	}},
	{Name: "bayes", make: func() Strategy { return &Bayes{} }, Settings: []Setting{
		intSetting("init", func(b *Bayes, v int) { b.Init = v }),
		intSetting("candidates", func(b *Bayes, v int) { b.Candidates = v }),
		floatSetting("xi", func(b *Bayes, v float64) { b.Xi = v }),
		floatSetting("prior_strength", func(b *Bayes, v float64) { b.PriorStrength = v }),
		intSetting("fit_max", func(b *Bayes, v int) { b.FitMax = v }),
		intSetting("trust_region", func(b *Bayes, v int) { b.Region = v }),
		intSetting("structure", func(b *Bayes, v int) { b.Structure = v }),
		intSetting("portfolio", func(b *Bayes, v int) { b.Portfolio = v }),
		intSetting("stall", func(b *Bayes, v int) { b.Stall = v }),
		intSetting("hedge", func(b *Bayes, v int) { b.Hedge = v }),
		floatSetting("feasibility_weight", func(b *Bayes, v float64) { b.FeasibilityWeight = v }),
		floatSetting("output_floor", func(b *Bayes, v float64) { b.OutputFloor = v }),
		floatSetting("recheck", func(b *Bayes, v float64) { b.Recheck = v }),
		intSetting("lengthscale_prior", func(b *Bayes, v int) { b.LengthscalePrior = v }),
		intSetting("fill", func(b *Bayes, v int) { b.Fill = v }),
		intSetting("little", func(b *Bayes, v int) { b.Little = v }),
		intSetting("explore", func(b *Bayes, v int) { b.Explore = v }),
		intSetting("bracket", func(b *Bayes, v int) { b.Bracket = v }),
		intSetting("fillable", func(b *Bayes, v int) { b.Fillable = v }),
		intSetting("auto_cores", func(b *Bayes, v int) { b.AutoCores = v }),
		intSetting("burst_starts", func(b *Bayes, v int) { b.BurstStarts = v }),
		intSetting("ranked", func(b *Bayes, v int) { b.Ranked = v }),
		intSetting("local_fill", func(b *Bayes, v int) { b.LocalFill = v }),
		intSetting("fit_defaults", func(b *Bayes, v int) { b.FitDefaults = v }),
		intSetting("trend", func(b *Bayes, v int) { b.Trend = v }),
		intSetting("warp", func(b *Bayes, v int) { b.Warp = v }),
		intSetting("race", func(b *Bayes, v int) { b.Race = v }),
		intSetting("infeasible_cap", func(b *Bayes, v int) { b.InfeasibleCap = v }),
		intSetting("queue_input", func(b *Bayes, v int) { b.QueueInput = v }),
		intSetting("thompson", func(b *Bayes, v int) { b.Thompson = v }),
		intSetting("additive", func(b *Bayes, v int) { b.Additive = v }),
	}},
}

// Strategies returns the declared strategies in the order Names lists them.
func Strategies() []StrategySpec { return append([]StrategySpec(nil), registry...) }

// Names lists the strategies New knows.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.Name
	}
	return out
}

func lookup(name string) (StrategySpec, bool) {
	for _, s := range registry {
		if s.Name == name {
			return s, true
		}
	}
	return StrategySpec{}, false
}

// New returns the named strategy configured from settings (a study's
// search.settings: name → value). Unknown names and invalid values are
// reported together, with field paths under search.settings.
func New(name string, settings map[string]string) (Strategy, error) {
	spec, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q; known: %s", ErrUnknownStrategy, name, strings.Join(Names(), ", "))
	}
	sp := settingParser{raw: settings}
	s := spec.make()
	for _, set := range spec.Settings {
		if set.setInt != nil {
			set.setInt(s, sp.int(set.Name, 0))
		} else {
			set.setFloat(s, sp.float(set.Name, 0))
		}
	}
	sp.unknown()
	if err := sp.ps.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// catalog hands configs the strategies' names and default, which it
// cannot import (search imports configs).
type catalog struct{}

func (catalog) Names() []string { return Names() }
func (catalog) Default() string { return DefaultStrategy }
func (catalog) SettingsDoc() string {
	var b strings.Builder
	for _, s := range registry {
		if len(s.Settings) == 0 {
			continue
		}
		names := make([]string, len(s.Settings))
		for i, set := range s.Settings {
			names[i] = set.Name + " (" + set.Kind() + ")"
		}
		fmt.Fprintf(&b, "\n%s: %s.", s.Name, strings.Join(names, ", "))
	}
	return strings.TrimPrefix(b.String(), "\n")
}

func init() { configs.UseStrategies(catalog{}) }
