package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// dataDir is where batchtune keeps its store and runtime state by default:
// $BATCHTUNE_HOME, else $XDG_DATA_HOME/batchtune, else ~/.local/share/batchtune.
func dataDir() string {
	if d := os.Getenv("BATCHTUNE_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "batchtune")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "batchtune")
	}
	return filepath.Join(os.TempDir(), "batchtune")
}

func defaultDBPath() string { return filepath.Join(dataDir(), "batchtune.db") }

// dbFlag is the --db flag every store-using command takes.
func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", Usage: "the bbolt store", Value: defaultDBPath(), EnvVars: []string{"BATCHTUNE_DB"}}
}

// studyChecks judge what configs cannot judge alone; tune and validate run
// them after the study's own checks: the files it names, and the space
// and strategy as the tuner will build them.
func studyChecks() []configs.StudyCheck {
	return []configs.StudyCheck{configs.CheckFiles, tuner.SpaceCheck(goruntime.NumCPU(), 0)}
}

// loadStudy reads the study at path, or the embedded demo study when path
// is empty, and runs every check.
func loadStudy(path string) (*configs.Study, error) {
	var (
		s   *configs.Study
		err error
	)
	if path == "" {
		s, err = configs.ParseStudy(configs.DemoStudyFile, configs.DemoStudy)
	} else {
		s, err = configs.LoadStudy(path)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Validate(studyChecks()...); err != nil {
		if path == "" && errors.Is(err, configs.ErrInvalidStudy) {
			return nil, fmt.Errorf("%w\n(the demo study runs from the root of a batchtune source tree after `make build`)", err)
		}
		return nil, err
	}
	return s, nil
}

// openStore opens the store for writing, creating its directory.
func openStore(path, command string) (*store.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return store.Open(path, &store.Options{Command: command})
}

// openStoreRO opens the store read-only: it works while a tune or the
// daemon writes.
func openStoreRO(path string) (*store.DB, error) {
	return store.Open(path, &store.Options{ReadOnly: true})
}

// The text renderers live in the report package; these names keep the
// commands' code short.
var (
	compactConfig = report.CompactConfig
	fmtDur        = report.FmtDur
	truncate      = report.Truncate
	indent        = report.Indent
)
