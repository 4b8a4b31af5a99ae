// Command sweep checks the capacity search against a fine sweep on the
// real stand-in. For each configuration given, it starts the study's
// server through its runtime (the process runtime and bin/tfs-emulator in
// the studies beside it), warms it up as a trial does, runs a capacity
// trial's measurement (burst, then the step search), then measures -rates
// open-loop rates spaced geometrically from -from to -to times the capacity
// found, each judged as a search step is, and prints one JSON line per
// configuration: the search's bracket, its steps and measuring time, and
// the sweep's highest rate that met the SLO and lowest that broke it.
//
//	go run ./experiments/capacity/sweep -study experiments/capacity/ranker.yaml \
//	    -config 'max_batch_size=16 batch_timeout_micros=2000 num_batch_threads=2 max_enqueued_batches=16 --grpc_max_threads=64' ...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batchtune/batchtune/capacity"
	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner"
	"github.com/batchtune/batchtune/tuner/runtime"
	_ "github.com/batchtune/batchtune/tuner/runtime/process"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, "; ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// line is one configuration's outcome.
type line struct {
	Config       string          `json:"config"`
	Search       capacity.Result `json:"search"`
	Burst        float64         `json:"burst_qps"`
	Measuring    time.Duration   `json:"measuring_ns"`
	Sweep        []capacity.Step `json:"sweep"`
	SweepMet     float64         `json:"sweep_highest_met"`
	SweepBroke   float64         `json:"sweep_lowest_broke"`
	SweepTime    time.Duration   `json:"sweep_measuring_ns"`
	Disagreement float64         `json:"disagreement"` // |search/sweep - 1|
	// GeneratorLimit is the search's; Invalid counts sweep rates the
	// generator could not offer (no verdict).
	GeneratorLimit string `json:"generator_limit,omitempty"`
	Invalid        int    `json:"invalid,omitempty"`
}

func main() {
	studyPath := flag.String("study", "experiments/capacity/ranker.yaml", "the study (its target, load and SLO)")
	rates := flag.Int("rates", 20, "rates in the sweep")
	from := flag.Float64("from", 0.7, "the sweep's lowest rate, times the capacity found")
	to := flag.Float64("to", 1.3, "the sweep's highest rate, times the capacity found")
	var cfgs multi
	flag.Var(&cfgs, "config", "a configuration: name=value batching fields and --flag=value server flags, space-separated (repeat)")
	flag.Parse()
	s, err := configs.LoadStudy(*studyPath)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: os.TempDir() + "/batchtune-sweep"})
	if err != nil {
		fail(err)
	}
	if err := rt.Recover(ctx); err != nil {
		fail(err)
	}
	p, err := tuner.NewStudyProber(s, nil)
	if err != nil {
		fail(err)
	}
	for _, c := range cfgs {
		l, err := one(ctx, rt, p, s, c, *rates, *from, *to)
		if err != nil {
			fail(fmt.Errorf("%s: %w", c, err))
		}
		json.NewEncoder(os.Stdout).Encode(l)
	}
	rt.Restore(ctx)
}

func one(ctx context.Context, rt runtime.Runtime, p *tuner.StudyProber, s *configs.Study, spec string, n int, from, to float64) (*line, error) {
	launch, err := parse(spec)
	if err != nil {
		return nil, err
	}
	srv, err := rt.Start(ctx, launch)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(context.WithoutCancel(ctx))
	c, err := p.Ready(ctx, srv.Endpoints())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m, err := tuner.MeasureCapacity(ctx, c, s)
	if err != nil {
		return nil, err
	}
	l := &line{Config: spec, Search: m.Search, Burst: m.Burst.QPS, Measuring: m.Measuring, GeneratorLimit: m.GeneratorLimit}
	found := m.Search.Capacity
	if !(found > 0) {
		return l, nil
	}
	for i := range n {
		rate := found * from * math.Pow(to/from, float64(i)/float64(n-1))
		st, r, err := tuner.MeasureStep(ctx, c, s, rate)
		if r == nil || ctx.Err() != nil {
			return nil, err
		}
		st.Offered = rate
		l.SweepTime += r.Duration
		if err != nil { // the generator could not offer it: no verdict
			st.Reason = "no verdict: " + err.Error()
			l.Sweep = append(l.Sweep, st)
			l.Invalid++
			continue
		}
		l.Sweep = append(l.Sweep, st)
		if st.Meets {
			l.SweepMet = max(l.SweepMet, rate)
		} else if l.SweepBroke == 0 || rate < l.SweepBroke {
			l.SweepBroke = rate
		}
	}
	if l.SweepMet > 0 {
		l.Disagreement = math.Abs(found/l.SweepMet - 1)
	}
	return l, nil
}

// parse reads "max_batch_size=16 batch_timeout_micros=2000 --grpc_max_threads=64".
func parse(spec string) (runtime.Config, error) {
	var rc runtime.Config
	var b strings.Builder
	for _, f := range strings.Fields(spec) {
		if strings.HasPrefix(f, "--") {
			rc.Flags = append(rc.Flags, f)
			continue
		}
		name, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return rc, fmt.Errorf("%q: want name=integer", f)
		}
		fmt.Fprintf(&b, "%s { value: %d }\n", name, n)
	}
	if _, err := configs.DecodeBatching([]byte(b.String())); err != nil {
		return rc, err
	}
	rc.Batching = []byte(b.String())
	return rc, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sweep:", err)
	os.Exit(1)
}
