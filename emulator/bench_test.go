package emulator

import (
	"context"
	"testing"

	"github.com/batchtune/batchtune/tfserving"
)

// BenchmarkPredictGRPC measures the stand-in's own cost per request over
// real gRPC on loopback (client and server in one process), on a model
// whose device time is negligible: the overhead the load generator and the
// server add on top of the device model, which decides how hard two cores
// can drive it.
func BenchmarkPredictGRPC(b *testing.B) {
	desc := `{
  "signatures": {"serving_default": {
    "inputs": {"features": {"dtype": "DT_FLOAT", "shape": [-1, 256]}},
    "outputs": {"scores": {"dtype": "DT_FLOAT", "shape": [-1, 1]}}}},
  "device": "accelerator", "host": {"spin_us": 0},
  "accelerator": {"launch_us": 0, "item_us": 0.001, "memory_mib": 1024, "activation_kib_per_item": 1}
}`
	base := testModel(b, desc)
	cfgPath := writeFile(b, "b.config", "max_batch_size { value: 32 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 2 }\nmax_enqueued_batches { value: 1000 }\n")
	r := start(b, Config{ModelBasePath: base, EnableBatching: true, BatchingParametersFile: cfgPath, GRPCMaxThreads: 256})
	req := &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: "m"}, Inputs: map[string]*tfserving.TensorProto{"features": floatInput(1, 256, 0)}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.predict.Predict(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
