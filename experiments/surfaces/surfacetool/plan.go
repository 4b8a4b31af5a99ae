package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/emulator/sim"
	"github.com/batchtune/batchtune/tfserving"
)

// point is one configuration of the six main parameters (0 leaves a
// batching field unset, TF's default; intra/inter 0 is TF's auto).
type point struct {
	Label              string `json:"label"`
	MaxBatchSize       int64  `json:"max_batch_size"`
	BatchTimeoutMicros int64  `json:"batch_timeout_micros"`
	NumBatchThreads    int64  `json:"num_batch_threads"`
	MaxEnqueuedBatches int64  `json:"max_enqueued_batches"`
	Intra              int    `json:"intra"`
	Inter              int    `json:"inter"`
}

func (p point) batching() *tfserving.BatchingParameters {
	b := &tfserving.BatchingParameters{}
	if p.MaxBatchSize > 0 {
		b.MaxBatchSize = wrapperspb.Int64(p.MaxBatchSize)
	}
	// The timeout is always written: 0 is a value a study tunes.
	b.BatchTimeoutMicros = wrapperspb.Int64(p.BatchTimeoutMicros)
	if p.NumBatchThreads > 0 {
		b.NumBatchThreads = wrapperspb.Int64(p.NumBatchThreads)
	}
	if p.MaxEnqueuedBatches > 0 {
		b.MaxEnqueuedBatches = wrapperspb.Int64(p.MaxEnqueuedBatches)
	}
	return b
}

func (p point) String() string {
	return fmt.Sprintf("mbs=%d,t=%d,nbt=%d,q=%d,intra=%d,inter=%d", p.MaxBatchSize, p.BatchTimeoutMicros, p.NumBatchThreads, p.MaxEnqueuedBatches, p.Intra, p.Inter)
}

// duration is a time.Duration written as "10s".
type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

// plan is a list of real stand-in runs: one model, one load, fixed flags.
type plan struct {
	// Model is the model base path (configs/models/NAME).
	Model          string   `json:"model"`
	Load           sim.Load `json:"load"`
	GRPCMaxThreads int      `json:"grpc_max_threads"`
	// Repeats: every configuration is run this many times, in rounds
	// (each round runs every configuration once, in order).
	Repeats     int      `json:"repeats"`
	MinDuration duration `json:"min_duration"`
	MaxDuration duration `json:"max_duration"`
	Configs     []point  `json:"configs"`
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (p *plan) check() error {
	switch {
	case p.Model == "":
		return fmt.Errorf("plan: model is required")
	case (p.Load.Concurrency > 0) == (p.Load.Rate > 0):
		return fmt.Errorf("plan: load needs a concurrency or a rate")
	case len(p.Configs) == 0:
		return fmt.Errorf("plan: no configs")
	}
	if p.Repeats == 0 {
		p.Repeats = 1
	}
	if p.MinDuration == 0 {
		p.MinDuration = duration(8 * time.Second)
	}
	if p.MaxDuration == 0 {
		p.MaxDuration = duration(20 * time.Second)
	}
	return nil
}
