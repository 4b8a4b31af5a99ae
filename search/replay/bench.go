package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/confirm"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search"
)

// BenchOptions configures Bench. Zero values take the documented defaults.
type BenchOptions struct {
	// Strategies to compare; required.
	Strategies []search.Strategy
	// Seeds is how many seeds (1..Seeds) each strategy runs with; default 30.
	Seeds int
	// Budget is the study's trial budget: the final pick and the stopping
	// rule are judged after Budget trials; default 50 (or the number of
	// runnable configurations, if smaller).
	Budget int
	// Horizon is how many trials a run may take to reach every target
	// (runs go on past Budget until they reach them or Horizon); default
	// the smaller of 400 and the number of runnable configurations.
	Horizon int
	// Batch is how many suggestions each Suggest call asks for; default 1.
	Batch int
	// Targets are the fractions of the best feasible objective to report
	// trials-to-reach for; default 0.95 and 0.99.
	Targets []float64
	// Resolution adds a target per surface at 1 − Surface.Resolution: the
	// closest to the best that one measurement per configuration can tell
	// apart from it (on a surface whose runs vary by 5%, "within 1%" is a
	// matter of which runs were drawn, not of where the search went).
	Resolution bool
	// CI writes each median with its distribution-free 95% confidence
	// interval over seeds (Row.MedianCI) in the table.
	CI bool
	// Stop is the stopping rule whose verdict is reported beside the
	// budget; default search.DefaultStopRule(Budget).
	Stop *search.StopRule
	// Workers run seeds in parallel; default GOMAXPROCS.
	Workers int
	// Logger receives a line per finished run; nil discards.
	Logger *slog.Logger
	// Confirm, when not nil, runs the tuner's confirmation stage with
	// these study settings (package confirm) on each run's history after
	// Budget trials, and reports what it recommends (Run.Confirmed):
	// what a user of the tuner is handed, where the pick is only the
	// stage's first candidate.
	Confirm *configs.Confirmation
	// EarlyStop replays a run over the SLO's latency or error budget as
	// the probe would have ended it in the tuner: early-stopped
	// (Replayer.EarlyStop). Off, the run is a completed infeasible
	// trial, which tells a strategy's objective model more than a tuner's
	// early-stopped trial does.
	EarlyStop bool
	// Trace, when not nil, is called with every trial of every run, in
	// the run's order; runs of different seeds call it concurrently.
	Trace func(TraceStep)
}

// TraceStep is one trial of a bench run, as BenchOptions.Trace sees it.
type TraceStep struct {
	Strategy string
	Seed     uint64
	N        int    // the trial's number in the run, from 1
	Reason   string // why the strategy suggested it
	Trial    search.Trial
	Truth    Truth   // the configuration's truth (Surface.Truth)
	Ratio    float64 // the truth's share of the best feasible (Surface.Ratio)
}

// Run is one strategy's run with one seed.
type Run struct {
	Seed uint64 `json:"seed"`
	// Reach holds, per target, the number of trials run until a truly
	// feasible configuration within the target was first run; 0 when it
	// never was within the horizon.
	Reach []int `json:"reach"`
	// Trials is how many trials ran.
	Trials int `json:"trials"`
	// Pick is the recommendation after Budget trials, before
	// confirmation: the trial with the best measured objective among those
	// measured feasible (nil when none was). PickTruth is its truth.
	Pick      search.Config `json:"pick"`
	PickTruth Truth         `json:"pick_truth"`
	// StopAt is the trial count at which the stopping rule fired (0: never
	// before the budget), and StopPick the pick at that point.
	StopAt        int     `json:"stop_at"`
	StopPickRatio float64 `json:"stop_pick_ratio"`
	// Confirmed is the confirmation stage's winner after Budget trials
	// (BenchOptions.Confirm; nil when it was not run, nothing measured
	// feasible or no candidate met the SLO in its repeats),
	// ConfirmedTruth its truth and ConfirmRepeats the repeats the stage
	// took.
	Confirmed      search.Config `json:"confirmed,omitempty"`
	ConfirmedTruth Truth         `json:"confirmed_truth"`
	ConfirmRepeats int           `json:"confirm_repeats,omitempty"`
	// SuggestTime is the wall time spent in Suggest over the run's Calls.
	SuggestTime time.Duration `json:"suggest_time"`
	Calls       int           `json:"calls"`
}

// Row summarises one strategy over every seed.
type Row struct {
	Strategy string
	// Median and P90 per target: trials to reach it, by the nearest-rank
	// method over seeds, +Inf when that rank never reached it.
	Median, P90 []float64
	// MedianCI per target is a confidence interval of at least 95% for
	// the median over all seeds the strategy could be run with, from the
	// order statistics of these seeds (medianCI): how far another draw of
	// as many seeds could move Median.
	MedianCI [][2]float64
	// Reached counts the seeds that reached each target.
	Reached []int
	// PickFeasible is the share of seeds whose final pick was truly
	// feasible; PickRatio the median over seeds of the pick's true
	// objective relative to the best (1 = the best; 0 for an infeasible or
	// missing pick).
	PickFeasible float64
	PickRatio    float64
	// StopMedian is the median trial count at which the stopping rule
	// fired (+Inf when it mostly did not), StopPickRatio the median pick
	// ratio at that point.
	StopMedian    float64
	StopPickRatio float64
	// ConfirmedFeasible and ConfirmedRatio are PickFeasible and PickRatio
	// for the confirmation stage's winner (ConfirmedShare), ConfirmedNone
	// the share of seeds where it recommended nothing (no candidate met
	// the SLO in its repeats: the tuner then says so and keeps what runs)
	// and ConfirmRepeats the mean repeats it took; zero when it was not
	// run.
	ConfirmedFeasible float64
	ConfirmedRatio    float64
	ConfirmedNone     float64
	ConfirmRepeats    float64
	// SuggestMean is the mean wall time of one Suggest call (wall clock
	// on whatever machine ran the bench: indicative only).
	SuggestMean time.Duration
	Runs        []Run
}

// Report is Bench's result for one surface.
type Report struct {
	Surface   string
	Objective objective.Objective
	SLO       time.Duration
	Runnable  int // configurations passing the hard rules
	Feasible  int // of which truly feasible
	Best      search.Config
	BestTruth Truth
	Seeds     int
	Budget    int
	Horizon   int
	Batch     int
	Targets   []float64
	// Resolution is Surface.Resolution: one run's coefficient of
	// variation among the best configurations.
	Resolution float64
	// Within counts, per target, the truly feasible configurations within
	// it: the needles a run must find one of.
	Within []int
	// CI is BenchOptions.CI.
	CI bool
	// Confirm is BenchOptions.Confirm.
	Confirm *configs.Confirmation
	// EarlyStop is BenchOptions.EarlyStop.
	EarlyStop bool
	Rows      []Row
}

// Bench runs every strategy with seeds 1..Seeds against s, each run asking
// for Batch suggestions at a time until Budget trials ran and every target
// was reached (or Horizon trials ran), and summarises trials-to-target, the
// pick after Budget trials and the stopping rule per strategy. Runs are
// independent and deterministic per seed, so the report does not depend on
// Workers (except the suggestion times).
func Bench(ctx context.Context, s *Surface, opts BenchOptions) (*Report, error) {
	if len(opts.Strategies) == 0 {
		return nil, errors.New("replay: no strategies to benchmark")
	}
	for _, st := range opts.Strategies {
		if err := st.Validate(s.space); err != nil {
			return nil, fmt.Errorf("replay: strategy %s: %w", st.Name(), err)
		}
	}
	runnable, err := s.space.Runnable(ctx)
	if err != nil {
		return nil, err
	}
	best, bestTruth, ok := s.Best()
	if !ok {
		return nil, fmt.Errorf("replay: surface %s has no truly feasible configuration to aim at", s.Name)
	}
	rep := &Report{
		Surface: s.Name, Objective: s.objective(), SLO: time.Duration(s.SLO),
		Runnable: len(runnable), Best: best, BestTruth: bestTruth,
		Seeds: opts.Seeds, Budget: opts.Budget, Horizon: opts.Horizon, Batch: opts.Batch, Targets: opts.Targets,
		CI: opts.CI, Confirm: opts.Confirm, EarlyStop: opts.EarlyStop,
	}
	for _, c := range runnable {
		if t, ok := s.Truth(c); ok && t.Feasible {
			rep.Feasible++
		}
	}
	if rep.Seeds == 0 {
		rep.Seeds = 30
	}
	if rep.Budget == 0 {
		rep.Budget = min(50, len(runnable))
	}
	if rep.Horizon == 0 {
		rep.Horizon = min(400, len(runnable))
	}
	if rep.Horizon < rep.Budget {
		return nil, fmt.Errorf("replay: horizon %d is shorter than the budget %d", rep.Horizon, rep.Budget)
	}
	if rep.Batch == 0 {
		rep.Batch = 1
	}
	if rep.Targets == nil {
		rep.Targets = []float64{0.95, 0.99}
	}
	rep.Resolution = s.Resolution()
	if opts.Resolution {
		t := math.Round(1000*(1-rep.Resolution)) / 1000
		rep.Targets = append(slices.Clip(rep.Targets), max(t, 0.5))
	}
	rep.Within = make([]int, len(rep.Targets))
	for _, c := range runnable {
		if t, ok := s.Truth(c); ok && t.Feasible {
			for i, target := range rep.Targets {
				if s.Ratio(t.Value, bestTruth.Value) >= target-1e-12 {
					rep.Within[i]++
				}
			}
		}
	}
	stop := search.DefaultStopRule(rep.Budget)
	if opts.Stop != nil {
		stop = *opts.Stop
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	type job struct{ strat, seed int }
	runs := make([][]Run, len(opts.Strategies))
	for i := range runs {
		runs[i] = make([]Run, rep.Seeds)
	}
	jobs := make(chan job)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				st := opts.Strategies[j.strat]
				r, err := benchRun(ctx, s, st, uint64(j.seed+1), rep, stop, opts.Trace)
				if err != nil {
					errs <- fmt.Errorf("replay: %s seed %d: %w", st.Name(), j.seed+1, err)
					cancel()
					return
				}
				log.Debug("bench run", "surface", s.Name, "strategy", st.Name(), "seed", r.Seed, "reach", r.Reach, "pick_feasible", r.PickTruth.Feasible)
				runs[j.strat][j.seed] = r
			}
		}()
	}
feed:
	for si := range opts.Strategies {
		for seed := range rep.Seeds {
			select {
			case jobs <- job{si, seed}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(chanValues(errs))...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for si, st := range opts.Strategies {
		d := s.objective().Direction()
		rep.Rows = append(rep.Rows, summarise(st.Name(), runs[si], rep.Targets,
			func(r Run) float64 { return PickShare(r, d, bestTruth.Value) },
			func(r Run) float64 { return ConfirmedShare(r, d, bestTruth.Value) }))
	}
	return rep, nil
}

func chanValues(c <-chan error) func(func(error) bool) {
	return func(yield func(error) bool) {
		for e := range c {
			if !yield(e) {
				return
			}
		}
	}
}

// benchRun is one strategy's study on the surface with one seed.
func benchRun(ctx context.Context, s *Surface, st search.Strategy, seed uint64, rep *Report, stop search.StopRule, trace func(TraceStep)) (Run, error) {
	r := Run{Seed: seed, Reach: make([]int, len(rep.Targets))}
	rp := s.Replay(seed)
	rp.EarlyStop = rep.EarlyStop
	var hist []search.Trial
	best := rep.BestTruth.Value
	reachedAll := func() bool { return !slices.Contains(r.Reach, 0) }
	for r.Trials < rep.Budget || (r.Trials < rep.Horizon && !reachedAll()) {
		limit := rep.Horizon
		if r.Trials < rep.Budget {
			limit = rep.Budget
		}
		t0 := time.Now()
		sugg, err := st.Suggest(ctx, search.Request{
			Space: s.space, Objective: s.objective(), History: hist,
			N: min(rep.Batch, limit-r.Trials), Seed: seed,
		})
		r.SuggestTime += time.Since(t0)
		r.Calls++
		if err != nil {
			return r, err
		}
		if len(sugg) == 0 {
			break
		}
		for _, sg := range sugg {
			tr, err := rp.Run(sg.Config)
			if err != nil {
				return r, err
			}
			tr.Expected = sg.Expected
			hist = append(hist, tr)
			if tr.Outcome == search.Rejected {
				return r, fmt.Errorf("suggested %s, which breaks a hard rule", sg.Config)
			}
			r.Trials++
			truth, _ := s.Truth(sg.Config)
			if truth.Feasible {
				for i, target := range rep.Targets {
					if r.Reach[i] == 0 && s.Ratio(truth.Value, best) >= target-1e-12 {
						r.Reach[i] = r.Trials
					}
				}
			}
			if trace != nil {
				trace(TraceStep{Strategy: st.Name(), Seed: seed, N: r.Trials, Reason: sg.Reason, Trial: tr, Truth: truth, Ratio: s.Ratio(truth.Value, best)})
			}
			if r.StopAt == 0 && r.Trials < rep.Budget {
				if ok, _ := stop.Stop(hist); ok {
					r.StopAt = r.Trials
					if r.StopPickRatio, err = pickRatio(ctx, s, st, hist, best); err != nil {
						return r, err
					}
				}
			}
			if r.Trials == rep.Budget {
				if err := r.recommend(ctx, s, st, hist, rep); err != nil {
					return r, err
				}
			}
		}
	}
	if r.Trials < rep.Budget { // the space ran out first
		if err := r.recommend(ctx, s, st, hist, rep); err != nil {
			return r, err
		}
	}
	return r, nil
}

// recommend sets what the run recommends after its budget: the pick and,
// when the report asks for it, the confirmation stage's winner. The pick
// is the stage's first candidate, so the history is ranked once for both.
func (r *Run) recommend(ctx context.Context, s *Surface, st search.Strategy, hist []search.Trial, rep *Report) error {
	var err error
	if rep.Confirm == nil {
		r.Pick, r.PickTruth, err = pick(ctx, s, st, hist)
		return err
	}
	cands, err := confirm.Candidates(ctx, st, search.Request{Space: s.space, Objective: s.objective(), History: hist, Seed: r.Seed}, rep.Confirm.TopK)
	if err != nil {
		return err
	}
	if len(cands) > 0 {
		r.Pick = cands[0].Config
		r.PickTruth, _ = s.Truth(r.Pick)
	}
	r.Confirmed, r.ConfirmedTruth, r.ConfirmRepeats, err = confirmRun(s, cands, r.Seed, *rep.Confirm)
	return err
}

// pick is what a tuner hands its confirmation stage first: the
// strategy's first-ranked configuration among those measured feasible
// (search.Rank), with its truth; nil when none was.
func pick(ctx context.Context, s *Surface, st search.Strategy, hist []search.Trial) (search.Config, Truth, error) {
	order, err := search.Rank(ctx, st, search.Request{Space: s.space, Objective: s.objective(), History: hist, N: 1})
	if err != nil || len(order) == 0 {
		return nil, Truth{}, err
	}
	truth, _ := s.Truth(order[0])
	return order[0], truth, nil
}

func pickRatio(ctx context.Context, s *Surface, st search.Strategy, hist []search.Trial, best float64) (float64, error) {
	c, t, err := pick(ctx, s, st, hist)
	if err != nil || c == nil || !t.Feasible {
		return 0, err
	}
	return s.Ratio(t.Value, best), nil
}

func summarise(name string, runs []Run, targets []float64, ratio, confirmed func(Run) float64) Row {
	row := Row{Strategy: name, Runs: runs}
	n := len(runs)
	for ti := range targets {
		vals := make([]float64, n)
		reached := 0
		for i, r := range runs {
			vals[i] = math.Inf(1)
			if r.Reach[ti] > 0 {
				vals[i] = float64(r.Reach[ti])
				reached++
			}
		}
		row.Median = append(row.Median, nearestRank(vals, 0.5))
		lo, hi := medianCI(vals, 0.95)
		row.MedianCI = append(row.MedianCI, [2]float64{lo, hi})
		row.P90 = append(row.P90, nearestRank(vals, 0.9))
		row.Reached = append(row.Reached, reached)
	}
	ratios := make([]float64, n)
	stops := make([]float64, n)
	stopRatios := make([]float64, n)
	confirmedRatios := make([]float64, n)
	feasible, confirmedFeasible, none, repeats, calls := 0, 0, 0, 0, 0
	var total time.Duration
	for i, r := range runs {
		if r.Pick != nil && r.PickTruth.Feasible {
			feasible++
		}
		if confirmedRatios[i] = confirmed(r); confirmedRatios[i] > 0 {
			confirmedFeasible++
		}
		if r.Confirmed == nil {
			none++
		}
		repeats += r.ConfirmRepeats
		ratios[i] = ratio(r)
		stops[i], stopRatios[i] = math.Inf(1), ratios[i]
		if r.StopAt > 0 {
			stops[i], stopRatios[i] = float64(r.StopAt), r.StopPickRatio
		}
		total += r.SuggestTime
		calls += r.Calls
	}
	row.PickFeasible = float64(feasible) / float64(max(n, 1))
	row.PickRatio = nearestRank(ratios, 0.5)
	row.ConfirmedFeasible = float64(confirmedFeasible) / float64(max(n, 1))
	row.ConfirmedRatio = nearestRank(confirmedRatios, 0.5)
	row.ConfirmRepeats = float64(repeats) / float64(max(n, 1))
	row.ConfirmedNone = float64(none) / float64(max(n, 1))
	row.StopMedian = nearestRank(stops, 0.5)
	row.StopPickRatio = nearestRank(stopRatios, 0.5)
	if calls > 0 {
		row.SuggestMean = total / time.Duration(calls)
	}
	return row
}

// nearestRank is the p-quantile of vals by the nearest-rank method (the
// smallest value with at least p of the values at or below it).
func nearestRank(vals []float64, p float64) float64 {
	if len(vals) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// medianCI is a distribution-free confidence interval for the median of
// the distribution vals were drawn from, with coverage at least conf: the
// order statistics x(l) and x(n+1−l), l the largest rank with
// P(B < l) ≤ (1−conf)/2 for B ~ Binomial(n, ½) (the sign-test interval;
// Conover, Practical Nonparametric Statistics, 3rd ed., §3.2). With 30
// seeds it is [x(10), x(21)], with 100 [x(40), x(61)]. Too few values for
// the coverage give (−Inf, +Inf).
func medianCI(vals []float64, conf float64) (float64, float64) {
	n := len(vals)
	tail := (1 - conf) / 2
	l, below := 0, 0.0 // below = P(B < l+1) = P(B ≤ l)
	lg, _ := math.Lgamma(float64(n + 1))
	for k := 0; k < n; k++ {
		a, _ := math.Lgamma(float64(k + 1))
		b, _ := math.Lgamma(float64(n - k + 1))
		below += math.Exp(lg - a - b - float64(n)*math.Ln2)
		if below > tail {
			break
		}
		l = k + 1
	}
	if l < 1 {
		return math.Inf(-1), math.Inf(1)
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	return s[l-1], s[n-l]
}

// WriteTable writes the report as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	unit := "QPS"
	best := fmt.Sprintf("%.1f", r.BestTruth.Value)
	if r.Objective.Kind == objective.MaxCapacity {
		unit = "capacity (req/s)"
	}
	if r.Objective.Direction() == objective.Minimize {
		unit = "P99"
		best = r.BestTruth.P99.Round(10 * time.Microsecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "surface %s: %s, SLO %s, error budget %g\n", r.Surface, r.Objective.Kind, r.SLO, r.Objective.ErrorBudget)
	fmt.Fprintf(&b, "  %d runnable configurations, %d truly feasible; best %s %s at %s\n", r.Runnable, r.Feasible, unit, best, r.Best)
	fmt.Fprintf(&b, "  one measurement resolves %.1f%% (the median coefficient of variation of one run among the %d best configurations)", 100*r.Resolution, ResolutionTop)
	if len(r.Within) == len(r.Targets) {
		var w []string
		for i, t := range r.Targets {
			w = append(w, fmt.Sprintf("%s: %d", Pct(t), r.Within[i]))
		}
		fmt.Fprintf(&b, "; configurations within each target: %s", strings.Join(w, ", "))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  %d seeds, %d suggestion(s) per call; trials to reach a fraction of the best: median and p90 over seeds (nearest rank; >%d: not within the horizon);\n", r.Seeds, r.Batch, r.Horizon)
	if r.CI {
		b.WriteString("  [lo,hi] after a median: its distribution-free 95% confidence interval over seeds (sign-test order statistics)\n")
	}
	fmt.Fprintf(&b, "  pick = the strategy's first-ranked measured-feasible configuration (search.Rank) after a budget of %d trials; stop = the stopping rule's verdict within that budget\n", r.Budget)
	if r.EarlyStop {
		b.WriteString("  runs over the SLO's latency or error budget replayed as early-stopped, as the tuner's probe ends them (-early-stop)\n")
	}
	if c := r.Confirm; c != nil {
		fmt.Fprintf(&b, "  confirmed = the confirmation stage's winner after the budget (top %d and the recipe, %d repeats each, up to %d where undecided%s, %.0f%% intervals; 0 when it recommends nothing); confirmed none = the seeds where it recommends nothing; repeats = its mean repeats\n", c.TopK, c.Repeats, max(c.MaxRepeats, c.Repeats), cleanNote(c), 100*c.Confidence)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{"strategy"}
	for _, t := range r.Targets {
		head = append(head, Pct(t)+" med", Pct(t)+" p90", "reached")
	}
	head = append(head, "pick feasible", "pick/best")
	if r.Confirm != nil {
		head = append(head, "confirmed feasible", "confirmed none", "confirmed/best", "repeats")
	}
	head = append(head, "stop@ med", "pick/best@stop", "suggest")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, row := range r.Rows {
		cells := []string{row.Strategy}
		for i := range r.Targets {
			med := Trials(row.Median[i], r.Horizon)
			if r.CI && i < len(row.MedianCI) {
				med = MedianWithCI(row.Median[i], row.MedianCI[i], r.Horizon)
			}
			cells = append(cells, med, Trials(row.P90[i], r.Horizon), fmt.Sprintf("%d/%d", row.Reached[i], len(row.Runs)))
		}
		cells = append(cells, fmt.Sprintf("%.0f%%", 100*row.PickFeasible), fmt.Sprintf("%.3f", row.PickRatio))
		if r.Confirm != nil {
			cells = append(cells, fmt.Sprintf("%.0f%%", 100*row.ConfirmedFeasible), fmt.Sprintf("%.0f%%", 100*row.ConfirmedNone), fmt.Sprintf("%.3f", row.ConfirmedRatio), fmt.Sprintf("%.1f", row.ConfirmRepeats))
		}
		cells = append(cells,
			Trials(row.StopMedian, r.Budget),
			fmt.Sprintf("%.3f", row.StopPickRatio),
			row.SuggestMean.Round(10*time.Microsecond).String(),
		)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Pct writes a target fraction as a percentage without the float's
// binary noise: 0.944 is "94.4%", not "94.39999999999999%".
func Pct(t float64) string {
	return strconv.FormatFloat(math.Round(t*1e4)/100, 'f', -1, 64) + "%"
}

// Trials writes a trial count, ">limit" for +Inf (not reached within the
// horizon or budget).
func Trials(v float64, limit int) string {
	if math.IsInf(v, 1) {
		return fmt.Sprintf(">%d", limit)
	}
	return fmt.Sprintf("%.0f", v)
}

// MedianWithCI writes a median trial count with its interval (medianCI):
// "16 [12,21]", or "16 [?]" when there were too few seeds for one.
func MedianWithCI(m float64, ci [2]float64, horizon int) string {
	if math.IsInf(ci[0], -1) {
		return Trials(m, horizon) + " [?]"
	}
	return Trials(m, horizon) + " [" + Trials(ci[0], horizon) + "," + Trials(ci[1], horizon) + "]"
}

// cleanNote words a stricter verdict on the SLO for the table's legend.
func cleanNote(c *configs.Confirmation) string {
	if c.CleanRepeats == 0 {
		return ""
	}
	return fmt.Sprintf("; no breach forgiven, the winner met the SLO in %d", c.CleanRepeats)
}
