package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "size a fleet: the servers a target rate needs with the recommended configuration, the baseline and TF's defaults",
		UsageText: "batchtune plan --target-qps N [--headroom 0.65] [--study NAME] [--run N] [--json]",
		Description: "Reads the capacities a max_capacity run confirmed (default: the study's\n" +
			"incumbent recommendation, else its latest) and prints, per configuration,\n" +
			"replicas = ceil(N / (capacity lower bound x headroom)) (seed 001 §3.3), and\n" +
			"the servers the tuning saves. A configuration whose interval's lower\n" +
			"bound is under half its mean gets no count: too few repeats to plan on.\n" +
			"Reads the store read-only.",
		Flags: append(studyFlags(),
			&cli.Float64Flag{Name: "target-qps", Usage: "the traffic to carry, in requests per second (required)"},
			&cli.Float64Flag{Name: "headroom", Value: capacity.DefaultHeadroom, Usage: "the share of each server's capacity to plan with, in (0, 1]"},
			&cli.BoolFlag{Name: "json", Usage: "print the plan as JSON"},
		),
		Action: func(c *cli.Context) error {
			if err := tuner.CheckPlanInputs(c.Float64("target-qps"), c.Float64("headroom"), "--target-qps", "--headroom"); err != nil {
				return usageErr(fmt.Errorf("plan: %w", err))
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
			rec, err := tuner.PlanRecommendation(c.Context, db, name, c.Uint64("run"))
			if err != nil {
				return err
			}
			p, err := tuner.MakePlan(rec, c.Float64("target-qps"), c.Float64("headroom"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			_, err = c.App.Writer.Write([]byte(p.Text()))
			return err
		},
	}
}

// capacityText renders a recommendation's capacity and its interval.
func capacityText(r *store.Recommendation) string {
	if r.CapacityLow > 0 && r.CapacityLow < r.CapacityHigh {
		return fmt.Sprintf("capacity %.1f req/s (%.0f%% interval %.1f to %.1f)", r.Capacity, 100*r.Confidence, r.CapacityLow, r.CapacityHigh)
	}
	return fmt.Sprintf("capacity %.1f req/s (no interval)", r.Capacity)
}
