package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/store"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a run's recommended batching.config, server flags or JSON",
		UsageText: "batchtune export [--study NAME] [--run N] [--format config|flags|json] [-o FILE]",
		Description: "Exports the recommendation of a run (default: the study's latest accepted\n" +
			"recommendation). Reads the store read-only; with -o the file is written\n" +
			"atomically.",
		Flags: append(studyFlags(),
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "config", Usage: "config (batching.config text), flags (server flags, one a line) or json"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to FILE instead of stdout"},
		),
		Action: func(c *cli.Context) error {
			db, err := openStoreRO(c.String("db"))
			if err != nil {
				return err
			}
			defer db.Close()
			rec, err := selectRecommendation(c, db)
			if err != nil {
				return err
			}
			var out []byte
			switch c.String("format") {
			case "config":
				out = []byte(rec.Batching)
			case "flags":
				out = []byte(strings.Join(rec.Flags, "\n") + "\n")
			case "json":
				if out, err = json.MarshalIndent(rec, "", "  "); err != nil {
					return err
				}
				out = append(out, '\n')
			default:
				return fmt.Errorf("export: --format: want config, flags or json, got %q", c.String("format"))
			}
			if path := c.String("output"); path != "" {
				return atomicfile.Write(path, out, 0o644)
			}
			_, err = c.App.Writer.Write(out)
			return err
		},
	}
}

// selectRecommendation finds the recommendation of --run, or the study's
// incumbent (its latest accepted one).
func selectRecommendation(c *cli.Context, db *store.DB) (*store.Recommendation, error) {
	name, run, err := selectRun(c, db)
	if err != nil {
		return nil, err
	}
	if c.Uint64("run") == 0 {
		rec, err := db.Incumbent(c.Context, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("study %s has no accepted recommendation yet", name)
		}
		return rec, err
	}
	recs, err := db.Recommendations(c.Context, name)
	if err != nil {
		return nil, err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Run == run.ID {
			return &recs[i], nil
		}
	}
	return nil, fmt.Errorf("run %d of study %s made no recommendation (%s: %s)", run.ID, name, run.Outcome, run.Detail)
}
