package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
)

// studyFlags select a study and one of its runs.
func studyFlags() []cli.Flag {
	return []cli.Flag{
		dbFlag(),
		&cli.StringFlag{Name: "study", Aliases: []string{"s"}, Usage: "the study's name (default: the only study in the store)"},
		&cli.Uint64Flag{Name: "run", Usage: "the run (default: the latest)"},
	}
}

// selectRun resolves --study and --run against the store.
func selectRun(c *cli.Context, db *store.DB) (string, *store.Run, error) {
	name := c.String("study")
	if name == "" {
		studies, err := db.Studies(c.Context)
		if err != nil {
			return "", nil, err
		}
		switch len(studies) {
		case 0:
			return "", nil, fmt.Errorf("no studies in %s yet", db.Path())
		case 1:
			name = studies[0].Name
		default:
			names := ""
			for i, s := range studies {
				if i > 0 {
					names += ", "
				}
				names += s.Name
			}
			return "", nil, fmt.Errorf("the store holds several studies (%s): name one with --study", names)
		}
	}
	if id := c.Uint64("run"); id != 0 {
		r, err := db.Run(c.Context, name, id)
		return name, r, err
	}
	runs, err := db.Runs(c.Context, name)
	if err != nil {
		return "", nil, err
	}
	if len(runs) == 0 {
		return "", nil, fmt.Errorf("study %s has no runs", name)
	}
	return name, &runs[len(runs)-1], nil
}

func trialsCommand() *cli.Command {
	return &cli.Command{
		Name:      "trials",
		Usage:     "list a run's trials",
		UsageText: "batchtune trials [--study NAME] [--run N] [--json | --csv]",
		Description: "Reads the store read-only, so it works while a tune or the daemon is running.\n" +
			"Each trial's configuration, state, figures and, for failed or infeasible ones, why.",
		Flags: append(studyFlags(),
			&cli.BoolFlag{Name: "json", Usage: "one JSON array of trials, with full measurements"},
			&cli.BoolFlag{Name: "csv", Usage: "CSV, one row per trial, one column per parameter"},
		),
		Action: func(c *cli.Context) error {
			if c.Bool("json") && c.Bool("csv") {
				return fmt.Errorf("trials: --json and --csv exclude each other")
			}
			db, err := openStoreRO(c.String("db"))
			if err != nil {
				return err
			}
			defer db.Close()
			name, run, err := selectRun(c, db)
			if err != nil {
				return err
			}
			trials, err := db.Trials(c.Context, name, run.ID)
			if err != nil {
				return err
			}
			w := c.App.Writer
			switch {
			case c.Bool("json"):
				// Listings leave measurements out; JSON readers want them.
				for i := range trials {
					full, err := db.Trial(c.Context, name, run.ID, trials[i].Seq)
					if err != nil {
						return err
					}
					trials[i] = *full
				}
				if trials == nil {
					trials = []store.Trial{} // [] as promised, not null
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(trials)
			case c.Bool("csv"):
				return writeTrialsCSV(c, trials)
			}
			fmt.Fprintf(w, "study %s, run %d (%s, %s), started %s\n", name, run.ID, run.Kind, run.State, run.Started.Local().Format(time.DateTime))
			report.WriteTrialTable(w, trials)
			if run.Detail != "" {
				fmt.Fprintf(w, "%s\n", run.Detail)
			}
			return nil
		},
	}
}

func writeTrialsCSV(c *cli.Context, trials []store.Trial) error {
	w := csv.NewWriter(c.App.Writer)
	// Parameters are columns in the order the first trial declares them.
	var names []string
	seen := map[string]bool{}
	for _, tr := range trials {
		for _, p := range tr.Config {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	head := []string{"seq", "role", "state"}
	head = append(head, names...)
	head = append(head, "objective", "feasible", "throughput", "p50_us", "p99_us", "p999_us", "error_rate", "mean_batch", "queue_share", "reason")
	if err := w.Write(head); err != nil {
		return err
	}
	for _, tr := range trials {
		row := []string{strconv.FormatUint(tr.Seq, 10), tr.Role, string(tr.State)}
		for _, n := range names {
			v := ""
			for _, p := range tr.Config {
				if p.Name == n {
					v = strconv.FormatInt(p.Value, 10)
				}
			}
			row = append(row, v)
		}
		obj := ""
		if tr.Objective != nil {
			obj = strconv.FormatFloat(*tr.Objective, 'g', -1, 64)
		}
		s := tr.Summary
		row = append(row, obj, strconv.FormatBool(tr.Feasible),
			strconv.FormatFloat(s.Throughput, 'f', 2, 64),
			strconv.FormatInt(s.P50.Microseconds(), 10), strconv.FormatInt(s.P99.Microseconds(), 10), strconv.FormatInt(s.P999.Microseconds(), 10),
			strconv.FormatFloat(s.ErrorRate, 'g', -1, 64), strconv.FormatFloat(s.MeanBatch, 'f', 2, 64), strconv.FormatFloat(s.QueueShare, 'f', 4, 64),
			tr.Reason)
		if err := w.Write(row); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}
