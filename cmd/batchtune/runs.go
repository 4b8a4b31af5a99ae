package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/store"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:      "runs",
		Usage:     "list a study's runs",
		UsageText: "batchtune runs [--study NAME] [--json]",
		Description: "Lists every run of the study, oldest first: its kind, state, outcome, trials\n" +
			"budget, when it started and how long it took, and why it ended. Reads the store\n" +
			"read-only. `batchtune trials --run N` shows one run's trials.",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "study", Aliases: []string{"s"}, Usage: "the study's name (default: the only study in the store)"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON array of runs"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("runs: unexpected argument %q", c.Args().First()))
			}
			db, err := openStoreRO(c.String("db"))
			if err != nil {
				return err
			}
			defer db.Close()
			name, _, err := selectRun(c, db)
			if err != nil {
				return err
			}
			runs, err := db.Runs(c.Context, name)
			if err != nil {
				return err
			}
			if runs == nil {
				runs = []store.Run{}
			}
			w := c.App.Writer
			if c.Bool("json") {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "run\tkind\tstate\toutcome\tbudget\tstarted\ttook\tdetail")
			for _, r := range runs {
				took := "-"
				if !r.Ended.IsZero() {
					took = r.Ended.Sub(r.Started).Round(time.Second).String()
				}
				outcome := string(r.Outcome)
				if outcome == "" {
					outcome = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Kind, r.State, outcome, r.Budget,
					r.Started.Local().Format(time.DateTime), took, truncate(r.Detail, 70))
			}
			return tw.Flush()
		},
	}
}
