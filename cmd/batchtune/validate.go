package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		ArgsUsage: "STUDY.yaml|DIR... (or --config STUDY.yaml, as tune takes it)",
		Description: "Reads each study, applies the defaults and reports every problem with its\n" +
			"file, line and field: unknown keys, invalid values, and files the study\n" +
			"names that are missing or unreadable. Exits non-zero when any study has one.\n" +
			"A directory stands for its *.yaml and *.yml files, as daemon --studies reads it.",
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
			paths, err := studyPaths(paths)
			if err != nil {
				return err
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
				printStudyWarnings(c.App.ErrWriter, path)
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

// studyPaths expands each directory argument to its study files (*.yaml,
// *.yml, not hidden, in name order), as daemon --studies reads it.
func studyPaths(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			out = append(out, a) // validateStudy reports what is wrong with it
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
		n := 0
		for _, e := range entries {
			name := e.Name()
			if ext := filepath.Ext(name); !e.IsDir() && !strings.HasPrefix(name, ".") && (ext == ".yaml" || ext == ".yml") {
				out = append(out, filepath.Join(a, name))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("validate: %s holds no study files (*.yaml, *.yml)", a)
		}
	}
	return out, nil
}
