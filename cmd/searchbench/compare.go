package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/search/replay"
)

// compareSide is one side of -compare: the rows of one strategy, per
// surface, from -json outputs.
type compareSide struct {
	label   string
	order   []string // surfaces in file order
	reports map[string]jsonReport
	rows    map[string]jsonRow
}

// loadSide reads -json outputs named FILE or FILE:STRATEGY (the first row
// of each report when no strategy is named).
func loadSide(specs []string) (*compareSide, error) {
	side := &compareSide{reports: map[string]jsonReport{}, rows: map[string]jsonRow{}}
	var labels []string
	for _, spec := range specs {
		path, strat := spec, ""
		if i := strings.LastIndex(spec, ":"); i > 0 && !strings.Contains(spec[i:], "/") {
			path, strat = spec[:i], spec[i+1:]
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var reps []jsonReport
		if err := json.Unmarshal(raw, &reps); err != nil {
			return nil, fmt.Errorf("%s: not searchbench -json output: %w", path, err)
		}
		for _, rep := range reps {
			i := 0
			if strat != "" {
				i = slices.IndexFunc(rep.Rows, func(r jsonRow) bool { return r.Strategy == strat })
			}
			if i < 0 || i >= len(rep.Rows) {
				return nil, fmt.Errorf("%s: surface %s has no row for strategy %q", path, rep.Surface, strat)
			}
			if _, dup := side.rows[rep.Surface]; dup {
				return nil, fmt.Errorf("%s: surface %s appears twice on one side", path, rep.Surface)
			}
			side.order = append(side.order, rep.Surface)
			side.reports[rep.Surface], side.rows[rep.Surface] = rep, rep.Rows[i]
			if !slices.Contains(labels, rep.Rows[i].Strategy) {
				labels = append(labels, rep.Rows[i].Strategy)
			}
		}
	}
	side.label = strings.Join(labels, ",")
	return side, nil
}

// runCompare is -compare: OLD... -- NEW... (or OLD NEW), each a -json
// output, compared per surface present on both sides and per target.
func runCompare(args []string, stdout, stderr io.Writer) int {
	oldSpecs, newSpecs := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		oldSpecs, newSpecs = args[:i], args[i+1:]
	} else if len(args) == 2 {
		oldSpecs, newSpecs = args[:1], args[1:]
	}
	if len(oldSpecs) == 0 || len(newSpecs) == 0 {
		fmt.Fprintln(stderr, "searchbench: -compare wants OLD.json NEW.json, or OLD.json... -- NEW.json... (each FILE or FILE:STRATEGY)")
		return 2
	}
	oldSide, err := loadSide(oldSpecs)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -compare:", err)
		return 1
	}
	newSide, err := loadSide(newSpecs)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -compare:", err)
		return 1
	}
	// Each comparison is held until all are known: Holm's adjustment
	// (replay.Holm) needs every p of the family.
	type line struct {
		name, target, seeds, old, new string
		ratio                         float64 // NaN where the old median is beyond the horizon
		v                             replay.Verdict
	}
	var lines []line
	for _, name := range oldSide.order {
		nr, ok := newSide.rows[name]
		if !ok {
			fmt.Fprintf(stderr, "searchbench: -compare: surface %s is on the old side only; left out\n", name)
			continue
		}
		orep, nrep := oldSide.reports[name], newSide.reports[name]
		or := oldSide.rows[name]
		if orep.Horizon != nrep.Horizon || !slices.Equal(orep.Targets, nrep.Targets) {
			fmt.Fprintf(stderr, "searchbench: -compare: surface %s: the sides ran with different horizons or targets (%d %v, %d %v)\n", name, orep.Horizon, orep.Targets, nrep.Horizon, nrep.Targets)
			return 1
		}
		for ti, target := range orep.Targets {
			v := replay.CompareReach(or.Runs, nr.Runs, ti, orep.Horizon)
			ratio := v.NewMedian / v.OldMedian
			if math.IsInf(v.OldMedian, 1) {
				ratio = math.NaN() // beyond the horizon: no ratio to tell
			}
			lines = append(lines, line{name: name, target: replay.Pct(target), seeds: fmt.Sprintf("%d/%d", len(or.Runs), len(nr.Runs)),
				old: replay.MedianWithCI(v.OldMedian, v.OldCI, orep.Horizon), new: replay.MedianWithCI(v.NewMedian, v.NewCI, orep.Horizon),
				ratio: ratio, v: v})
		}
	}
	ps := make([]float64, len(lines))
	for i, l := range lines {
		ps[i] = l.v.P
	}
	holm := replay.Holm(ps)
	var settings []string // the confirmation settings, where the sides differ
	picks, err := comparePicks(oldSide, newSide, thePick, &settings)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -compare:", err)
		return 1
	}
	confirmed, err := comparePicks(oldSide, newSide, theConfirmed, &settings)
	if err != nil {
		fmt.Fprintln(stderr, "searchbench: -compare:", err)
		return 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "new (%s) against old (%s): median trials to each target over seeds [sign-test 95%% interval], Mann-Whitney p (two-sided; a seed that never reached the target counts as the horizon + 1) and its Holm adjustment over the %d comparisons; won or lost at p < %g\n", newSide.label, oldSide.label, len(lines), replay.Alpha)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "surface\ttarget\tseeds\told\tnew\tnew/old\tp\tholm p\tverdict")
	var t tally
	worst, worstAt := 0.0, ""
	for i, l := range lines {
		verdict := t.add(l.v.Sign, holm[i])
		if l.v.Sign == -1 && l.ratio > worst { // NaN (an old median beyond the horizon) never is
			worst, worstAt = l.ratio, l.name+" "+l.target
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.3g\t%.3g\t%s\n", l.name, l.target, l.seeds, l.old, l.new, ratioLabel(l.ratio), l.v.P, holm[i], verdict)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "searchbench:", err)
		return 1
	}
	fmt.Fprintf(&b, "won %d, lost %d of %d comparisons (p < %g)", t.won, t.lost, len(lines), replay.Alpha)
	if worstAt != "" {
		fmt.Fprintf(&b, "; the widest significant loss: %s, %s", worstAt, ratioLabel(worst))
	}
	fmt.Fprintf(&b, "\nafter Holm's correction for %d comparisons: won %d, lost %d\n", len(lines), t.holmWon, t.holmLost)
	for _, t := range []struct {
		lines []pickLine
		rec   recommendation
	}{{picks, thePick}, {confirmed, theConfirmed}} {
		var notes []string
		if t.rec.confirmed {
			notes = settings
		}
		if err := writePicks(&b, t.lines, t.rec, oldSide.label, newSide.label, notes); err != nil {
			fmt.Fprintln(stderr, "searchbench:", err)
			return 1
		}
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return 1
	}
	if len(lines) == 0 {
		fmt.Fprintln(stderr, "searchbench: -compare: no surface is on both sides")
		return 1
	}
	return 0
}

// pickLine is one surface's comparison of what the runs recommend.
type pickLine struct {
	name, seeds string
	oldFeas     float64 // share of seeds whose recommendation is truly feasible
	newFeas     float64
	v           replay.Verdict
}

// recommendation is one thing a run recommends after its budget, as
// -compare reads it: its table's title and what it is worth per run.
type recommendation struct {
	title, noun, count string
	worth              func(replay.Run, objective.Direction, float64) float64
	// confirmed: only runs of the confirmation stage (-confirm) have it.
	confirmed bool
}

var (
	// thePick is the pick after the budget (replay.PickShare): the
	// configuration a tuner hands its confirmation stage first.
	thePick = recommendation{"the pick after the budget", "pick", "picks", replay.PickShare, false}
	// theConfirmed is the confirmation stage's winner
	// (replay.ConfirmedShare): what the user is handed.
	theConfirmed = recommendation{"the confirmed recommendation (the confirmation stage's winner after the budget)", "recommendation", "confirmed", replay.ConfirmedShare, true}
)

// comparePicks compares, per surface on both sides, what each seed's
// recommendation rec is worth. With confirmed, only surfaces whose reports
// on both sides ran the confirmation stage count; none is no error.
func comparePicks(oldSide, newSide *compareSide, rec recommendation, notes *[]string) ([]pickLine, error) {
	var out []pickLine
	for _, name := range oldSide.order {
		nr, ok := newSide.rows[name]
		if !ok {
			continue
		}
		orep, nrep := oldSide.reports[name], newSide.reports[name]
		if orep.Budget != nrep.Budget || orep.BestValue != nrep.BestValue {
			return nil, fmt.Errorf("surface %s: the sides ran with different budgets or best values (%d %g, %d %g)", name, orep.Budget, orep.BestValue, nrep.Budget, nrep.BestValue)
		}
		if rec.confirmed && (orep.Confirm == nil || nrep.Confirm == nil) {
			continue
		}
		if rec.confirmed && *orep.Confirm != *nrep.Confirm {
			// Comparing two confirmation settings is what the table is
			// for then; it says which ran on which side.
			n := fmt.Sprintf("old confirmed with %s, new with %s", confirmLabel(*orep.Confirm), confirmLabel(*nrep.Confirm))
			if !slices.Contains(*notes, n) {
				*notes = append(*notes, n)
			}
		}
		kind, err := objective.Parse(orep.Objective)
		if err != nil {
			return nil, fmt.Errorf("surface %s: %w", name, err)
		}
		shares := func(runs []replay.Run) ([]float64, float64) {
			out, feas := make([]float64, len(runs)), 0
			for i, r := range runs {
				out[i] = rec.worth(r, kind.Direction(), orep.BestValue)
				if out[i] > 0 {
					feas++
				}
			}
			return out, float64(feas) / float64(max(len(runs), 1))
		}
		or := oldSide.rows[name]
		a, af := shares(or.Runs)
		c, cf := shares(nr.Runs)
		out = append(out, pickLine{name: name, seeds: fmt.Sprintf("%d/%d", len(or.Runs), len(nr.Runs)), oldFeas: af, newFeas: cf, v: replay.ComparePicks(a, c)})
	}
	return out, nil
}

// confirmLabel names a confirmation's settings by their study keys.
func confirmLabel(c configs.Confirmation) string {
	return fmt.Sprintf("top_k %d, repeats %d, max_repeats %d, clean_repeats %d, confidence %g", c.TopK, c.Repeats, c.MaxRepeats, c.CleanRepeats, c.Confidence)
}

// writePicks writes a recommendation's table, with Holm's correction over
// its own family (what runs recommend is not trials-to-target, and is
// counted apart), after notes (the sides' differing settings).
func writePicks(w io.Writer, picks []pickLine, rec recommendation, oldLabel, newLabel string, notes []string) error {
	if len(picks) == 0 {
		return nil
	}
	ps := make([]float64, len(picks))
	for i, l := range picks {
		ps[i] = l.v.P
	}
	holm := replay.Holm(ps)
	fmt.Fprintf(w, "\n%s, new (%s) against old (%s): its truth's median share of the best over seeds (0 for a truly infeasible %s, or none), the share of seeds whose %s is truly feasible, Mann-Whitney p and its Holm adjustment over the %d surfaces\n", rec.title, newLabel, oldLabel, rec.noun, rec.noun, len(picks))
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "surface\tseeds\told\tnew\told feasible\tnew feasible\tp\tholm p\tverdict")
	var t tally
	for i, l := range picks {
		verdict := t.add(l.v.Sign, holm[i])
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.0f%%\t%.0f%%\t%.3g\t%.3g\t%s\n", l.name, l.seeds, l.v.OldMedian, l.v.NewMedian, 100*l.oldFeas, 100*l.newFeas, l.v.P, holm[i], verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: won %d, lost %d of %d (p < %g); after Holm's correction: won %d, lost %d\n", rec.count, t.won, t.lost, len(picks), replay.Alpha, t.holmWon, t.holmLost)
	return err
}

// tally counts a table's verdicts, at p < Alpha and after Holm's
// correction.
type tally struct{ won, lost, holmWon, holmLost int }

// add counts one comparison (its Sign and Holm-adjusted p) and returns its
// verdict label: won, lost or -, with " (holm)" where the adjustment keeps
// it.
func (t *tally) add(sign int, holmP float64) string {
	verdict := "-"
	switch sign {
	case 1:
		t.won++
		verdict = "won"
	case -1:
		t.lost++
		verdict = "lost"
	}
	if holmP < replay.Alpha && sign != 0 {
		if sign == 1 {
			t.holmWon++
		} else {
			t.holmLost++
		}
		verdict += " (holm)"
	}
	return verdict
}

func ratioLabel(r float64) string {
	switch {
	case math.IsNaN(r):
		return "-"
	case math.IsInf(r, 1):
		return "inf"
	}
	return fmt.Sprintf("%.2fx", r)
}

// runTruth is -truth: each configuration's truth (the mean of its
// recorded runs, what the benchmark scores strategies against) on each
// surface, with its share of the surface's best truly feasible objective.
func runTruth(paths, configs []string, stdout, stderr io.Writer) int {
	var b strings.Builder
	for _, path := range paths {
		s, err := replay.Load(path)
		if err != nil {
			fmt.Fprintln(stderr, "searchbench:", err)
			return 1
		}
		bc, bt, ok := s.Best()
		if !ok {
			fmt.Fprintf(stderr, "searchbench: %s: no truly feasible configuration\n", path)
			return 1
		}
		fmt.Fprintf(&b, "%s: best %s: %.4g\n", s.Name, bc, bt.Value)
		for _, text := range configs {
			c, err := s.ParseConfig(text)
			if err != nil {
				fmt.Fprintf(stderr, "searchbench: -truth: %s: %v\n", path, err)
				return 2
			}
			t, ok := s.Truth(c)
			if !ok {
				fmt.Fprintf(stderr, "searchbench: -truth: %s: %s was not recorded\n", path, c)
				return 1
			}
			verdict := "truly feasible"
			if !t.Feasible {
				verdict = "not truly feasible"
			}
			fmt.Fprintf(&b, "  %s: %.4g, %.3f of the best, %s\n", c, t.Value, s.Ratio(t.Value, bt.Value), verdict)
		}
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return 1
	}
	return 0
}
