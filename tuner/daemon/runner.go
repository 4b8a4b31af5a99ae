package daemon

import (
	"context"
	"io"
	"log/slog"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Runner runs one study once. The daemon calls it from a goroutine of its
// own per run, never twice at once for studies whose targets conflict.
// observe receives the tuner's events; it must be called on the run's
// goroutine and returns quickly.
type Runner interface {
	Run(ctx context.Context, s *configs.Study, ro tuner.RunOptions, observe func(tuner.Event)) (*tuner.Report, error)
}

// TunerRunner is the Runner the daemon uses by default: the study's
// runtime (runtime.New, of the kinds the program links in), a tuner over
// the daemon's store, one tuner.Run.
type TunerRunner struct {
	DB *store.DB
	// StateDir holds the runtimes' per-study state; "" for their default.
	StateDir string
	// Cores and GPUs are what the tuned server sees (tuner.Options).
	Cores, GPUs int
	// Logger receives the runtime's and the tuner's records; nil discards.
	Logger *slog.Logger
}

var _ Runner = (*TunerRunner)(nil)

// Run builds the study's runtime and tuner and runs it once.
func (r *TunerRunner) Run(ctx context.Context, s *configs.Study, ro tuner.RunOptions, observe func(tuner.Event)) (*tuner.Report, error) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: r.StateDir, Logger: log})
	if err != nil {
		return nil, err
	}
	if c, ok := rt.(io.Closer); ok {
		defer c.Close()
	}
	t, err := tuner.New(s, r.DB, rt, nil, &tuner.Options{Logger: log, Observe: observe, Cores: r.Cores, GPUs: r.GPUs})
	if err != nil {
		return nil, err
	}
	return t.Run(ctx, ro)
}
