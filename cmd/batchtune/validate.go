package main

import (
	"errors"
	"fmt"
	// The binary carries its own time-zone database, so schedule.time_zone
	// is checked the same way on a FROM-scratch image as on a workstation.
	_ "time/tzdata"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/configs"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check study files without running anything",
		ArgsUsage: "STUDY.yaml... (or --config STUDY.yaml, as tune takes it)",
		Description: "Reads each study, applies the defaults and reports every problem with its\n" +
			"file, line and field: unknown keys, invalid values, and files the study\n" +
			"names that are missing or unreadable. Exits non-zero when any study has one.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print problems only, not the studies that are valid"},
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "a study file, as tune takes it (arguments name more)"},
		},
		Action: func(c *cli.Context) error {
			paths := c.Args().Slice()
			if f := c.String("config"); f != "" {
				paths = append([]string{f}, paths...)
			}
			if len(paths) == 0 {
				return errors.New("validate: name at least one study file")
			}
			bad := 0
			for _, path := range paths {
				if err := validateStudy(path, studyChecks()); err != nil {
					bad++
					fmt.Fprintln(c.App.ErrWriter, err)
					continue
				}
				if !c.Bool("quiet") {
					fmt.Fprintf(c.App.Writer, "%s: ok\n", path)
				}
			}
			if bad > 0 {
				return fmt.Errorf("validate: %d of %d studies have problems", bad, len(paths))
			}
			return nil
		},
	}
}

// validateStudy loads path and runs checks, returning every problem.
func validateStudy(path string, checks []configs.StudyCheck) error {
	s, err := configs.LoadStudy(path)
	if err != nil {
		return err // located problems, or an unreadable file named by the error
	}
	return s.Validate(checks...)
}
