package device

import (
	"math"
	"strconv"
	"time"

	"github.com/batchtune/batchtune/configs"
)

// AcceleratorSpec is the cost and memory model of an accelerator, as a
// model description states it.
type AcceleratorSpec struct {
	// LaunchUS is the fixed device time of a batch, in microseconds.
	LaunchUS float64 `yaml:"launch_us" json:"launch_us"`
	// ItemUS is the device time per row once the device is saturated.
	ItemUS float64 `yaml:"item_us" json:"item_us"`
	// KneeItems is the batch size below which the device is
	// under-occupied: the row term is ItemUS·sqrt(rows² + KneeItems²), so a
	// small batch costs about as much as KneeItems rows and efficiency
	// (rows per unit of row time) rises towards 1 past the knee.
	KneeItems float64 `yaml:"knee_items" json:"knee_items"`
	// Jitter is the relative standard deviation of an execution's time.
	Jitter float64 `yaml:"jitter" json:"jitter"`
	// MemoryMiB is the device's memory; WeightsMiB what the loaded model
	// occupies; ActivationKiBPerItem what each row of a batch adds.
	MemoryMiB            float64 `yaml:"memory_mib" json:"memory_mib"`
	WeightsMiB           float64 `yaml:"weights_mib" json:"weights_mib"`
	ActivationKiBPerItem float64 `yaml:"activation_kib_per_item" json:"activation_kib_per_item"`
	// ColdRuns is how many executions of each batch size pay the cold
	// penalty (kernel selection and autotuning for a new shape);
	// ColdFactor multiplies their time.
	ColdRuns   int     `yaml:"cold_runs" json:"cold_runs"`
	ColdFactor float64 `yaml:"cold_factor" json:"cold_factor"`
}

// Validate adds every problem of s to ps, fields named under path.
func (s AcceleratorSpec) Validate(path string, ps *configs.Problems) {
	if s.LaunchUS < 0 {
		ps.Add(path+".launch_us", "must not be negative, got %g", s.LaunchUS)
	}
	if s.ItemUS <= 0 {
		ps.Add(path+".item_us", "must be positive, got %g", s.ItemUS)
	}
	if s.KneeItems < 0 {
		ps.Add(path+".knee_items", "must not be negative, got %g", s.KneeItems)
	}
	if s.Jitter < 0 || s.Jitter > 0.5 {
		ps.Add(path+".jitter", "must be in [0, 0.5], got %g", s.Jitter)
	}
	if s.MemoryMiB <= 0 {
		ps.Add(path+".memory_mib", "must be positive, got %g", s.MemoryMiB)
	}
	if s.WeightsMiB < 0 || (s.MemoryMiB > 0 && s.WeightsMiB >= s.MemoryMiB) {
		ps.Add(path+".weights_mib", "must be in [0, memory_mib=%g), got %g", s.MemoryMiB, s.WeightsMiB)
	}
	if s.ActivationKiBPerItem <= 0 {
		ps.Add(path+".activation_kib_per_item", "must be positive, got %g", s.ActivationKiBPerItem)
	}
	if s.ColdRuns < 0 {
		ps.Add(path+".cold_runs", "must not be negative, got %d", s.ColdRuns)
	}
	if s.ColdRuns > 0 && s.ColdFactor < 1 {
		ps.Add(path+".cold_factor", "must be at least 1 when cold_runs is set, got %g", s.ColdFactor)
	}
}

// WarmTime is the mean device time of a batch of rows once warm.
func (s AcceleratorSpec) WarmTime(rows int) time.Duration {
	r := float64(rows)
	us := s.LaunchUS + s.ItemUS*math.Sqrt(r*r+s.KneeItems*s.KneeItems)
	return time.Duration(us * float64(time.Microsecond))
}

// ExecTime is the device time of one execution of a batch of rows after
// prior executions of that size, with z a standard normal draw for the
// jitter (clamped to ±3σ).
func (s AcceleratorSpec) ExecTime(rows, prior int, z float64) time.Duration {
	z = math.Max(-3, math.Min(3, z))
	f := math.Max(0.1, 1+s.Jitter*z)
	if prior < s.ColdRuns {
		f *= s.ColdFactor
	}
	return time.Duration(float64(s.WarmTime(rows)) * f)
}

// MemoryBytes is the device memory a batch of rows needs, weights included.
func (s AcceleratorSpec) MemoryBytes(rows int) int64 {
	return int64(s.WeightsMiB*(1<<20) + float64(rows)*s.ActivationKiBPerItem*(1<<10))
}

// MaxRows is the largest batch that fits the device's memory.
func (s AcceleratorSpec) MaxRows() int {
	free := (s.MemoryMiB - s.WeightsMiB) * (1 << 20)
	return int(free / (s.ActivationKiBPerItem * (1 << 10)))
}

// CPUSpec is the MLP the CPU model computes.
type CPUSpec struct {
	// Hidden are the widths of the hidden layers; every layer is a dense
	// float32 product plus bias and ReLU, the last layer linear.
	Hidden []int `yaml:"hidden" json:"hidden"`
}

// Validate adds every problem of s to ps, fields named under path.
func (s CPUSpec) Validate(path string, ps *configs.Problems) {
	if len(s.Hidden) == 0 || len(s.Hidden) > 8 {
		ps.Add(path+".hidden", "must list 1 to 8 layer widths, got %d", len(s.Hidden))
	}
	for i, h := range s.Hidden {
		if h <= 0 || h > 8192 {
			ps.Add(path+".hidden["+strconv.Itoa(i)+"]", "must be in [1, 8192], got %d", h)
		}
	}
}

// HostSpec is host-side work done for every batch on either device.
type HostSpec struct {
	// PreprocessRounds is how many rounds of a float transform each input
	// feature of each row goes through before the device runs (feature
	// normalisation, bucketing): real work sharded over the intra-op pool.
	PreprocessRounds int `yaml:"preprocess_rounds" json:"preprocess_rounds"`
	// SpinUS is how long idle intra-op workers spin before sleeping
	// (default DefaultSpin; a negative value: no spinning).
	SpinUS *float64 `yaml:"spin_us" json:"spin_us"`
}

// Spin returns the configured spin time.
func (s HostSpec) Spin() time.Duration {
	if s.SpinUS == nil {
		return DefaultSpin
	}
	if *s.SpinUS <= 0 {
		return 0
	}
	return time.Duration(*s.SpinUS * float64(time.Microsecond))
}

// Validate adds every problem of s to ps, fields named under path.
func (s HostSpec) Validate(path string, ps *configs.Problems) {
	if s.PreprocessRounds < 0 || s.PreprocessRounds > 100000 {
		ps.Add(path+".preprocess_rounds", "must be in [0, 100000], got %d", s.PreprocessRounds)
	}
	if s.SpinUS != nil && *s.SpinUS > 10000 {
		ps.Add(path+".spin_us", "must be at most 10000, got %g", *s.SpinUS)
	}
}
