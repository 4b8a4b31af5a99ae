package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
)

func tuneCommand() *cli.Command {
	return &cli.Command{
		Name:  "tune",
		Usage: "run a tuning study: restart, warm up and measure TF Serving per configuration",
		UsageText: "batchtune tune [options] [STUDY.yaml]\n\n" +
			"   batchtune tune                      # the demo study: the bundled stand-in (run from the source tree after make build)\n" +
			"   batchtune tune configs/examples/tfserving-gpu.yaml   # or --config configs/examples/tfserving-gpu.yaml",
		Description: "Runs the study's search: each suggested configuration is checked against the\n" +
			"hard rules (batch_timeout_micros < SLO/3, TF's own), then TF Serving is restarted\n" +
			"with it, waited for, warmed up and measured under the study's fixed load. Every\n" +
			"trial is stored as it changes state, so rerunning an interrupted study resumes\n" +
			"it. The best candidates and the baseline are then re-measured on fresh restarts\n" +
			"and the winner, chosen by its lower confidence bound, is written to the study's\n" +
			"export path with the matching server flags.\n\n" +
			"On a terminal a status line shows where the run is; otherwise one plain line\n" +
			"is printed per trial. --log-format text|json prints structured logs instead.\n\n" +
			"Ctrl-C once: finish the current trial, restore the server, stop (resumable).\n" +
			"Twice: abort the trial, restore the server. Three times: exit at once.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "the study file (default: the embedded demo study)"},
			dbFlag(),
			&cli.StringFlag{Name: "state-dir", Usage: "runtime state (trial files, snapshots of tuned containers)", Value: filepath.Join(dataDir(), "runtime")},
			&cli.IntFlag{Name: "trials", Usage: "override the study's search budget"},
			&cli.Int64Flag{Name: "seed", Usage: "override the study's search.seed (a different, reproducible sequence of suggestions)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON instead of tables"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every step (debug level)"},
			&cli.StringFlag{Name: "log-format", Usage: "structured logs on stderr, text or json, instead of one plain line per trial"},
		},
		Action: runTune,
	}
}

func runTune(c *cli.Context) error {
	if n := c.Int("trials"); c.IsSet("trials") && (n < 1 || n > configs.MaxTrials) {
		return usageErr(fmt.Errorf("tune: --trials must be from 1 to %d, got %d", configs.MaxTrials, n))
	}
	path, err := studyArg(c, "tune")
	if err != nil {
		return err
	}
	study, err := loadStudy(path)
	if err != nil {
		return err
	}
	if c.IsSet("seed") {
		study.Search.Seed = c.Int64("seed")
	}
	if err := checkExportWritable(study); err != nil {
		return err
	}
	db, err := openStore(c.String("db"), "batchtune tune "+study.Name)
	if err != nil {
		return err
	}
	defer db.Close()

	out := c.App.Writer
	tty := isTerminal(os.Stderr)
	log, structured, err := tuneLogger(os.Stderr, c.String("log-format"), c.Bool("verbose"))
	if err != nil {
		return err
	}

	rt, err := runtime.New(study.Target, runtime.Options{Study: study.Name, StateDir: c.String("state-dir"), Logger: log})
	if err != nil {
		return err
	}
	if cl, ok := rt.(io.Closer); ok {
		defer cl.Close()
	}
	prog := newProgress(os.Stderr, tty, study)
	prog.quiet = structured && !tty
	t, err := tuner.New(study, db, rt, nil, &tuner.Options{Logger: log, Observe: prog.event, Cores: goruntime.NumCPU()})
	if err != nil {
		return err
	}
	irq := interruptsOf(c)
	prog.start()
	rep, err := t.Run(irq.abort, tuner.RunOptions{Kind: store.KindOneShot, Budget: c.Int("trials"), Drain: irq.graceful})
	prog.stop()
	if rep == nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil {
			return errors.Join(err, jerr)
		}
		if err == nil && rep.Recommendation == nil && rep.Run.Outcome == store.OutcomeNoFeasible {
			return noRecommendation(study, rep)
		}
		return err
	}
	printReport(out, t, rep)
	if err == nil && rep.Recommendation == nil && rep.Run.Outcome == store.OutcomeNoFeasible {
		return noRecommendation(study, rep)
	}
	if errors.Is(err, tuner.ErrInterrupted) {
		return fmt.Errorf("run %d interrupted after %d trials; run the same command again to resume", rep.Run.ID, len(rep.Trials))
	}
	return err
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// progress shows where a run is: a status line redrawn in place on a
// terminal, one line per finished trial otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	study *configs.Study
	// quiet leaves the trial lines to the structured log.
	quiet bool
	began time.Time

	mu       sync.Mutex
	last     tuner.Event
	trial    *store.Trial
	finished []time.Duration // durations of finished trials, for the estimate
	done     chan struct{}
	wg       sync.WaitGroup
}

func newProgress(w io.Writer, tty bool, s *configs.Study) *progress {
	return &progress{w: w, tty: tty, study: s, done: make(chan struct{})}
}

func (p *progress) start() {
	p.began = time.Now()
	if !p.tty {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			}
		}
	}()
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progress) event(e tuner.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = e
	if e.Trial != nil {
		tr := *e.Trial
		p.trial = &tr
		if tr.State.Terminal() && tr.State != store.TrialRejected && len(tr.Phases) > 0 {
			p.finished = append(p.finished, tr.Phases[len(tr.Phases)-1].At.Sub(tr.Phases[0].At))
		}
	}
	if p.quiet {
		return // the structured log says it all, one line per step
	}
	switch {
	case e.Trial == nil && e.Message != "":
		p.line(e.Message)
	case e.Trial != nil && e.Trial.State.Terminal():
		p.line(trialLine(e))
	}
	p.redraw()
}

// line prints a permanent line (above the status line on a terminal).
func (p *progress) line(s string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, s)
}

func trialLine(e tuner.Event) string {
	tr := e.Trial
	s := fmt.Sprintf("%-7s %2d/%-2d trial %-3d %-13s %s", e.Stage, e.Index, e.Total, tr.Seq, tr.State, compactConfig(tr.Config))
	if c := tr.Capacity; c != nil && tr.Objective != nil {
		s += fmt.Sprintf("  →  capacity %.1f req/s (%d steps), P99 there %s", c.Capacity, len(c.Steps), fmtDur(tr.Summary.P99))
		if !tr.Feasible {
			s += " (infeasible)"
		}
	} else if tr.Objective != nil {
		s += fmt.Sprintf("  →  %s, P99 %s", report.Throughput(tr.Summary, tr.State), fmtDur(tr.Summary.P99))
		if !tr.Feasible {
			s += " (infeasible)"
		}
	}
	if tr.Reason != "" && !tr.Feasible {
		s += "  [" + truncate(tr.Reason, 90) + "]"
	} else if stoppedDominated(tr) {
		s += "  [stopped early: certainly below the best so far]"
	}
	return s
}

// stoppedDominated reports whether tr's measurement stopped once it was
// certainly below the search's best so far (probe.StopDominated).
func stoppedDominated(tr *store.Trial) bool {
	var m struct {
		StopReason probe.StopReason `json:"stop_reason"`
	}
	return len(tr.Measurement) > 0 && json.Unmarshal(tr.Measurement, &m) == nil && m.StopReason == probe.StopDominated
}

// redraw writes the status line; p.mu is held.
func (p *progress) redraw() {
	if !p.tty || p.trial == nil {
		return
	}
	e := p.last
	elapsed := time.Since(p.began).Round(time.Second)
	s := fmt.Sprintf("%s %d/%d · trial %d %s · elapsed %s", e.Stage, e.Index, e.Total, p.trial.Seq, p.trial.State, elapsed)
	if e.Best != nil {
		s += fmt.Sprintf(" · best %.1f", *e.Best)
	}
	if n := len(p.finished); n > 0 && e.Total > 0 {
		var sum time.Duration
		for _, d := range p.finished {
			sum += d
		}
		left := e.Total - e.Index
		if e.Stage == tuner.StageSearch {
			c := p.study.Confirmation
			left += c.Repeats * (c.TopK + 2) // the confirmation stage to come, at most
		}
		s += fmt.Sprintf(" · ~%s left", (sum / time.Duration(n) * time.Duration(left)).Round(time.Second))
	}
	fmt.Fprint(p.w, "\r\033[K"+truncate(s, 150))
}

// printReport writes the run's trial table and recommendation.
func printReport(w io.Writer, t *tuner.Tuner, rep *tuner.Report) {
	fmt.Fprintf(w, "\nstudy %s, run %d (%s): %d trials in %s\n", rep.Study, rep.Run.ID, rep.Run.State, len(rep.Trials), rep.Elapsed.Round(time.Second))
	if rep.StopReason != "" {
		fmt.Fprintf(w, "search stopped: %s\n", rep.StopReason)
	}
	report.WriteTrialTable(w, rep.Trials)
	conf := rep.Confirmation
	if conf != nil && len(conf.Candidates) > 0 {
		kind := t.Objective().Kind // the unit of the objective's columns
		fmt.Fprintln(w, "\nconfirmation (fresh restarts, interleaved):")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "candidate\tsearch\tconfirmed mean\tinterval\tP99\tmean batch\tfeasible")
		rows := append(append([]tuner.Candidate(nil), conf.Candidates...), conf.Baseline)
		for i, cd := range rows {
			mark := ""
			if conf.Winner != nil && i == *conf.Winner {
				mark = " ← winner"
			}
			search := "-"
			if cd.SearchObjective != nil {
				search = kind.Cell(*cd.SearchObjective)
			}
			interval := "-"
			if cd.Estimate.Bounded {
				interval = "[" + kind.Cell(cd.Estimate.Low) + ", " + kind.Cell(cd.Estimate.High) + "]"
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%.1f\t%d/%d\n", cd.Label, mark, search, kind.Cell(cd.Estimate.Mean), interval, fmtDur(cd.P99), cd.MeanBatch, cd.Feasible, cd.Repeats)
		}
		tw.Flush()
	}
	if conf != nil && conf.Note != "" {
		fmt.Fprintf(w, "note: %s\n", conf.Note)
	}
	rec := rep.Recommendation
	if rec == nil {
		fmt.Fprintf(w, "\nno recommendation: %s\n", rep.Run.Detail)
		return
	}
	fmt.Fprintf(w, "\nrecommended: %s\n", compactConfig(rec.Config))
	if g := conf.Gain; g != nil {
		if g.Bounded {
			fmt.Fprintf(w, "gain over %s: %+.1f%% (%.0f%% interval %+.1f%% to %+.1f%%)\n", rec.Baseline, 100*g.Rel, 100*g.Conf, 100*g.Low, 100*g.High)
		} else {
			fmt.Fprintf(w, "gain over %s: %+.1f%% (no interval: one repeat)\n", rec.Baseline, 100*g.Rel)
		}
	}
	if rec.Capacity > 0 {
		fmt.Fprintf(w, "%s; size a fleet with: batchtune plan --study %s --target-qps N\n", capacityText(rec), rec.Study)
	}
	fmt.Fprintf(w, "why: %s\n", conf.Why)
	fmt.Fprintf(w, "\nbatching.config:\n%s", indent(rec.Batching))
	fmt.Fprintf(w, "server flags: %s\n", strings.Join(rec.Flags, " "))
	for _, p := range rep.Exported {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
}
