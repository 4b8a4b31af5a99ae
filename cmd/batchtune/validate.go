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
		ArgsUsage: "STUDY.yaml...",
		Description: "Reads each study, applies the defaults and reports every problem with its\n" +
			"file, line and field: unknown keys, invalid values, and files the study\n" +
			"names that are missing or unreadable. Exits non-zero when any study has one.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print problems only, not the studies that are valid"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return errors.New("validate: name at least one study file")
			}
			bad := 0
			for _, path := range c.Args().Slice() {
				if err := validateStudy(path, studyChecks()); err != nil {
					bad++
					fmt.Fprintln(c.App.ErrWriter, err)
					continue
				}
				if !c.Bool("quiet") {
					fmt.Fprintf(c.App.Writer, "%s: ok\n", path)
				}
				printStudyWarnings(c.App.ErrWriter, path)
			}
			if bad > 0 {
				return fmt.Errorf("validate: %d of %d studies have problems", bad, c.NArg())
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
