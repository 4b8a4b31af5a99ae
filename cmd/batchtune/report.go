package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write a run's report: one self-contained HTML page with plots, or JSON, or text",
		UsageText: "batchtune report [--study NAME] [--run N] [-o FILE] [--format html|json|text]\n\n" +
			"   batchtune report                     # the latest run of the only study, to batchtune-report-STUDY-runN.html\n" +
			"   batchtune report --format json -o -  # the same content as data, on stdout",
		Description: "Reads the store read-only (it works while a tune or the daemon runs) and\n" +
			"writes the verdict with its intervals and exported config, every trial against\n" +
			"the SLO with the Pareto front, convergence, one panel per tuned parameter, the\n" +
			"confirmation repeats, load steps where trials recorded several, per-trial TF\n" +
			"metrics, failures with their reasons, and for re-tuned studies their history.\n" +
			"The HTML page has inline SVG and CSS: it opens with no network.",
		Flags: append(studyFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the file to write; - for stdout (default: batchtune-report-STUDY-runN.html for html, stdout otherwise)"},
			&cli.StringFlag{Name: "format", Value: "html", Usage: "html, json or text"},
		),
		Action: runReport,
	}
}

func runReport(c *cli.Context) error {
	format := c.String("format")
	switch format {
	case "html", "json", "text":
	default:
		return fmt.Errorf("report: --format %q: want html, json or text", format)
	}
	if c.NArg() > 0 {
		return fmt.Errorf("report: unexpected argument %q (name the study with --study)", c.Args().First())
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
	rep, err := report.Build(c.Context, db, name, run.ID, time.Now())
	if err != nil {
		return err
	}
	out := c.String("output")
	if out == "" && format == "html" {
		out = fmt.Sprintf("batchtune-report-%s-run%d.html", name, run.ID)
	}
	var w io.Writer = c.App.Writer
	var f *os.File
	if out != "" && out != "-" {
		if f, err = os.Create(out); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		w = f
	}
	switch format {
	case "html":
		err = report.WriteHTML(w, rep, nil)
	case "json":
		err = report.WriteJSON(w, rep)
	default:
		err = report.WriteText(w, rep)
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			fmt.Fprintf(c.App.ErrWriter, "wrote %s (study %s, run %d, %d trials)\n", out, name, run.ID, len(rep.Trials))
		}
	}
	return err
}
