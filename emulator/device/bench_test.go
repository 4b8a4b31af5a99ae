package device

import (
	"context"
	"fmt"
	"testing"

	"github.com/batchtune/batchtune/emulator/sched"
	"github.com/batchtune/batchtune/emulator/tensor"
)

func randRows(rows, features int) tensor.Tensor {
	x := tensor.Tensor{Shape: []int64{int64(rows), int64(features)}, Values: make([]float32, rows*features)}
	for i := range x.Values {
		x.Values[i] = float32(i%17) / 7
	}
	return x
}

// BenchmarkPreprocess reports the host preprocessing cost per row and
// round for 256 features on one thread.
func BenchmarkPreprocess(b *testing.B) {
	pool := NewPool(1, 0)
	defer pool.Close()
	x := randRows(64, 256)
	for b.Loop() {
		preprocess(pool, x, 32)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64/32, "ns/row-round")
}

// BenchmarkCPUModel reports the MLP's cost per row by batch size and
// intra-op threads (one inter-op thread, no contention).
func BenchmarkCPUModel(b *testing.B) {
	for _, intra := range []int{1, 2, 4} {
		for _, rows := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("intra=%d/rows=%d", intra, rows), func(b *testing.B) {
				rt := NewRuntime(intra, 1, DefaultSpin)
				defer rt.Close()
				m := NewCPU(CPUSpec{Hidden: []int{512, 512}}, HostSpec{}, 128, 1, rt, 1)
				x := randRows(rows, 128)
				for b.Loop() {
					if _, err := m.Run(context.Background(), x); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(rows), "µs/row")
			})
		}
	}
}

// BenchmarkAcceleratorHost reports the host-side cost of an accelerator
// batch: Run minus nothing, on a device with zero time.
func BenchmarkAcceleratorHost(b *testing.B) {
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			rt := NewRuntime(1, 1, 0)
			defer rt.Close()
			spec := AcceleratorSpec{ItemUS: 1e-6, MemoryMiB: 1024, ActivationKiBPerItem: 1}
			m := NewAccelerator(spec, HostSpec{PreprocessRounds: 32}, 256, 1, rt, sched.Real(), 1)
			x := randRows(rows, 256)
			for b.Loop() {
				if _, err := m.Run(context.Background(), x); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(rows), "µs/row")
		})
	}
}
