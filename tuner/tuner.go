package tuner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tfserving"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Stages of a run, as events and trials name them.
const (
	StageSearch  = "search"
	StageConfirm = "confirm"
)

// maxRejections bounds consecutive suggestions refused by the hard rules.
// Strategies only suggest runnable points, so reaching it means a bug or a
// space whose rules leave nothing to run.
const maxRejections = 50

// restoreTimeout bounds putting the server back after a run, on a context
// of its own: it must happen even when the run's context was cancelled.
const restoreTimeout = 2 * time.Minute

// Options configure a Tuner. The zero value is usable.
type Options struct {
	// Logger receives key-value lines at trial and run boundaries; nil
	// discards them.
	Logger *slog.Logger
	// Observe, when set, is called with every trial state change and at
	// the run's milestones, on the tuner's goroutine; it must return quickly.
	Observe func(Event)
	// Cores is the number of CPU cores the server sees (TF's default
	// num_batch_threads, the soft prior on thread counts); default the
	// cores of this machine.
	Cores int
	// GPUs is the number of accelerators the server uses (the seeds' recipe
	// sets num_batch_threads to it); 0 for none.
	GPUs int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Host reads the machine's CPU counters and load (stability.go);
	// probe.ReadHost when nil.
	Host func() probe.HostSample
}

// Event reports progress. Trial is a copy of the trial as just stored; it
// is nil for run milestones.
type Event struct {
	Time  time.Time
	Run   uint64
	Stage string
	// Index is the trial's position in its stage (1-based) and Total the
	// stage's planned count (the trial budget while searching).
	Index, Total int
	Trial        *store.Trial
	// Best is the best feasible objective so far, nil before there is one.
	Best    *float64
	Message string
}

// Tuner runs one study. Build it with New; Run may be called again (the
// daemon runs a study on its schedule), but not concurrently.
type Tuner struct {
	study     *configs.Study
	db        *store.DB
	rt        runtime.Runtime
	prober    Prober
	space     *search.Space
	strategy  search.Strategy
	objective objective.Objective
	stopRule  search.StopRule
	baseline  reference
	log       *slog.Logger
	observe   func(Event)
	now       func() time.Time
	cores     int
	drain     <-chan struct{} // the current run's RunOptions.Drain
	verify    Verifier        // the current run's RunOptions.Verify
	host      hostReading     // the machine, read at the current run's start
	par       int             // search trials at once (search.parallelism)
	pin       string          // the node confirmation runs on (parallel.go); "" anywhere
	putMu     sync.Mutex      // one trial stored (and observed) at a time
}

// reference is a configuration that is not (necessarily) a point of the
// space: the baseline the winner is compared with.
type reference struct {
	label  string // "tf-defaults" or the baseline file
	params []store.Param
	launch runtime.Config
}

// Rules are the study facts the space is searched under.
func Rules(s *configs.Study, cores, gpus int) search.Rules {
	r := search.Rules{SLO: s.SLO.Latency.D(), Cores: cores, GPUs: gpus, Fixed: search.PinnedFlags(s.Target.Flags)}
	if s.Load.Mode == configs.LoadClosed {
		r.SetClosedLoop(Objective(s).Kind, s.Load.Concurrency*max(s.Load.Payload.Batch, 1))
	}
	return r
}

// Objective is the study's objective (package objective's terms, which
// search shares): a study that names none, or one unknown, maximises
// throughput, as validation would have refused it.
func Objective(s *configs.Study) objective.Objective {
	o := objective.Objective{Kind: objective.MaxThroughput, ErrorBudget: s.SLO.ErrorRate}
	if k, err := s.Objective.Kind(); err == nil {
		o.Kind = k
	}
	if o.Kind.OpenLoop() {
		o.Rate = s.Load.Rate
	}
	return o
}

// SpaceCheck is a configs.StudyCheck that builds the study's space, so
// that `batchtune validate` reports the space's problems with their lines.
func SpaceCheck(cores, gpus int) configs.StudyCheck {
	return func(s *configs.Study) error {
		if _, err := search.NewSpace(s.Space, Rules(s, cores, gpus)); err != nil {
			return err
		}
		if _, err := search.New(s.Search.Strategy, settings(s.Search.Settings)); err != nil {
			return err
		}
		return checkQuantile(s.SLO.Quantile)
	}
}

// New prepares a tuner for study s (already validated), with its store,
// runtime and prober (nil: a StudyProber). It checks everything that can
// be checked before a server starts: the space, the strategy's settings,
// the baseline file, the payload files.
func New(s *configs.Study, db *store.DB, rt runtime.Runtime, p Prober, o *Options) (*Tuner, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Cores <= 0 {
		opts.Cores = goruntime.NumCPU()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Observe == nil {
		opts.Observe = func(Event) {}
	}
	t := &Tuner{
		study: s, db: db, rt: rt, prober: p,
		objective: Objective(s),
		log:       opts.Logger.With("study", s.Name),
		observe:   opts.Observe,
		now:       opts.Now,
		cores:     opts.Cores,
		host:      hostReading{read: opts.Host},
	}
	if t.host.read == nil {
		t.host.read = probe.ReadHost
	}
	t.par = max(s.Search.Parallelism, 1)
	if _, ok := rt.(runtime.Concurrent); t.par > 1 && !ok {
		return nil, fmt.Errorf("search.parallelism: %d: the %s runtime runs one trial at a time (parallel trials need a runtime that gives each its own node or device: kubernetes)", t.par, s.Target.Runtime)
	}
	var err error
	if t.space, err = search.NewSpace(s.Space, Rules(s, opts.Cores, opts.GPUs)); err != nil {
		return nil, fmt.Errorf("space: %w", err)
	}
	if t.strategy, err = search.New(s.Search.Strategy, settings(s.Search.Settings)); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	if err := t.strategy.Validate(t.space); err != nil {
		return nil, fmt.Errorf("search.settings: %w", err)
	}
	if err := t.objective.Validate(); err != nil {
		return nil, err
	}
	t.stopRule = search.DefaultStopRule(0) // the budget is counted per run below
	if err := checkQuantile(s.SLO.Quantile); err != nil {
		return nil, err
	}
	if t.baseline, err = baselineOf(s, opts.Cores); err != nil {
		return nil, err
	}
	if t.prober == nil {
		if t.prober, err = NewStudyProber(s, opts.Logger); err != nil {
			return nil, err
		}
	}
	if _, ok := t.prober.(CapacityProber); t.objective.Kind == objective.MaxCapacity && !ok {
		return nil, fmt.Errorf("objective %s: the prober %T cannot search a server's capacity", t.objective.Kind, t.prober)
	}
	return t, nil
}

// settings turns the study's strategy settings (YAML scalars) into the
// strings search.New parses.
func settings(m map[string]any) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// Space is the study's search space.
func (t *Tuner) Space() *search.Space { return t.space }

// Objective is what the study optimises.
func (t *Tuner) Objective() objective.Objective { return t.objective }

// launch is what the runtime runs for configuration c.
func (t *Tuner) launch(c search.Config) runtime.Config {
	var rc runtime.Config
	rc.Batching = configs.EncodeBatching(t.space.Batching(c))
	if v, ok := c.Get(search.IntraOpParallelism); ok {
		rc.IntraOpParallelism = int(v)
	}
	if v, ok := c.Get(search.InterOpParallelism); ok {
		rc.InterOpParallelism = int(v)
	}
	for _, f := range t.space.Flags(c) {
		name, _ := runtime.FlagName(f)
		if name != search.IntraOpParallelism && name != search.InterOpParallelism {
			rc.Flags = append(rc.Flags, f)
		}
	}
	return rc
}

// ExportFlags are the server flags that go with configuration c's
// batching.config: what a user adds to tensorflow_model_server's command line.
func (t *Tuner) ExportFlags(c search.Config) []string {
	rc := t.launch(c)
	flags := []string{"--enable_batching", "--batching_parameters_file=" + BatchingFileForFlags(t.study)}
	if rc.IntraOpParallelism != 0 {
		flags = append(flags, "--tensorflow_intra_op_parallelism="+strconv.Itoa(rc.IntraOpParallelism))
	}
	if rc.InterOpParallelism != 0 {
		flags = append(flags, "--tensorflow_inter_op_parallelism="+strconv.Itoa(rc.InterOpParallelism))
	}
	return append(flags, rc.Flags...)
}

// BatchingFileForFlags is the path the exported flags name for the
// batching.config: the export path, or a placeholder when there is none.
func BatchingFileForFlags(s *configs.Study) string {
	if s.Export.Path != "" {
		return s.Export.Path
	}
	return "batching.config"
}

func params(c search.Config) []store.Param {
	out := make([]store.Param, len(c))
	for i, a := range c {
		out[i] = store.Param{Name: a.Name, Value: a.Value}
	}
	return out
}

func configOf(ps []store.Param) search.Config {
	out := make(search.Config, len(ps))
	for i, p := range ps {
		out[i] = search.Assignment{Name: p.Name, Value: p.Value}
	}
	return out
}

// baselineOf is the configuration the winner is compared with: the study's
// production batching.config, or TF Serving's defaults (an empty file).
// Run replaces it with what a tuned-in-place container runs today when the
// study names none (productionBaseline).
func baselineOf(s *configs.Study, cores int) (reference, error) {
	p, err := configs.DecodeBatching(nil)
	if err != nil {
		return reference{}, err
	}
	label := "tf-defaults"
	if path := s.Confirmation.Baseline; path != "" {
		if p, err = configs.LoadBatching(path); err != nil {
			return reference{}, fmt.Errorf("confirmation.baseline: %w", err)
		}
		label = path
	}
	return newReference(label, p, 0, 0, cores), nil
}

func newReference(label string, p *tfserving.BatchingParameters, intra, inter, cores int) reference {
	b := configs.Resolve(p, cores)
	return reference{
		label:  label,
		launch: runtime.Config{Batching: configs.EncodeBatching(p), IntraOpParallelism: intra, InterOpParallelism: inter},
		params: []store.Param{
			{Name: search.MaxBatchSize, Value: b.MaxBatchSize},
			{Name: search.BatchTimeoutMicros, Value: b.BatchTimeoutMicros},
			{Name: search.NumBatchThreads, Value: b.NumBatchThreads},
			{Name: search.MaxEnqueuedBatches, Value: b.MaxEnqueuedBatches},
			{Name: search.IntraOpParallelism, Value: int64(intra)},
			{Name: search.InterOpParallelism, Value: int64(inter)},
		},
	}
}

// productionBaseline makes the baseline the configuration the user's
// server runs with today, when the runtime tunes one in place
// (runtime.InPlace) and the study names no baseline file: that, not TF's
// defaults, is what a change is measured against.
func (t *Tuner) productionBaseline(ctx context.Context) error {
	ip, ok := t.rt.(runtime.InPlace)
	if !ok || t.study.Confirmation.Baseline != "" {
		return nil
	}
	name := ip.InPlace()
	if name == "" {
		return nil
	}
	prod, err := ip.Production(ctx)
	if err != nil {
		return fmt.Errorf("reading the production configuration: %w", err)
	}
	p, err := configs.DecodeBatching(prod.Batching)
	if err != nil {
		return fmt.Errorf("production batching.config %s: %w", prod.BatchingPath, err)
	}
	intra, inter := threadFlags(prod.Args)
	t.baseline = newReference("production ("+name+")", p, intra, inter, t.cores)
	return nil
}

// threadFlags reads the intra- and inter-op thread counts from a
// tensorflow_model_server command line, in either of the forms TF's flag
// parser takes (--name=value, or --name value); 0 where a flag is absent.
func threadFlags(args []string) (intra, inter int) {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		n, err := strconv.Atoi(value)
		switch {
		case err != nil:
		case name == search.IntraOpParallelism:
			intra = n
		case name == search.InterOpParallelism:
			inter = n
		}
	}
	return intra, inter
}

// history turns stored trials into the strategy's history.
func history(trials []store.Trial) []search.Trial {
	out := make([]search.Trial, 0, len(trials))
	for _, tr := range trials {
		h := search.Trial{
			Config:    configOf(tr.Config),
			Feasible:  tr.Feasible,
			P99:       tr.Summary.P99,
			ErrorRate: tr.Summary.ErrorRate,
			QPS:       tr.Summary.Throughput,
			Expected:  tr.Expected,
		}
		switch tr.State {
		case store.TrialSucceeded:
			h.Outcome = search.Succeeded
		case store.TrialFailed:
			h.Outcome = search.Failed
		case store.TrialEarlyStopped:
			h.Outcome = search.EarlyStopped
		case store.TrialRejected:
			h.Outcome = search.Rejected
		case store.TrialInvalid:
			h.Outcome = search.Invalid
		default:
			h.Outcome = search.Interrupted
		}
		if tr.Objective != nil {
			h.Value, h.Measured = *tr.Objective, true
		}
		out = append(out, h)
	}
	return out
}

// ran reports whether a trial cost a restart and a measurement.
func ran(s store.TrialState) bool {
	switch s {
	case store.TrialSucceeded, store.TrialFailed, store.TrialEarlyStopped, store.TrialInvalid:
		return true
	}
	return false
}

func (t *Tuner) better(a, b float64) bool { return t.objective.Better(a, b) }

// bestFeasible is the best feasible objective among trials, nil if none.
func (t *Tuner) bestFeasible(trials []store.Trial) *float64 {
	var best *float64
	for _, tr := range trials {
		if tr.State == store.TrialSucceeded && tr.Feasible && tr.Objective != nil {
			if best == nil || t.better(*tr.Objective, *best) {
				v := *tr.Objective
				best = &v
			}
		}
	}
	return best
}

func encodeResult(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
