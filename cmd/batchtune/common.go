package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/configs"
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

// short names for the tuned parameters in tables.
var shortNames = map[string]string{
	"max_batch_size":                  "batch",
	"batch_timeout_micros":            "timeout_us",
	"num_batch_threads":               "threads",
	"max_enqueued_batches":            "queue",
	"tensorflow_intra_op_parallelism": "intra",
	"tensorflow_inter_op_parallelism": "inter",
	"allowed_batch_sizes":             "allowed",
	"grpc_max_threads":                "grpc_threads",
	"rest_api_num_threads":            "rest_threads",
}

// compactConfig renders a configuration as batch=32 timeout_us=2000 ...
func compactConfig(ps []store.Param) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		name := shortNames[p.Name]
		if name == "" {
			name = p.Name
		}
		parts[i] = name + "=" + strconv.FormatInt(p.Value, 10)
	}
	return strings.Join(parts, " ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return d.Round(time.Millisecond).String()
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
