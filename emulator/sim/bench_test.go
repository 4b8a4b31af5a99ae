package sim

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/tfserving"
)

// BenchmarkTrial measures the cost of simulating one trial (3 s warmup +
// 10 s measured, 64 closed-loop clients) of the bundled ranker model:
// the figure that bounds how fast surfaces are recorded.
func BenchmarkTrial(b *testing.B) {
	m, err := model.Load("../../configs/models/ranker")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		queue int64
	}{{"queue=64", 64}, {"queue=2-errors", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := Trial{
				Model: m.Desc,
				Batching: &tfserving.BatchingParameters{MaxBatchSize: wrapperspb.Int64(32), BatchTimeoutMicros: wrapperspb.Int64(2000),
					NumBatchThreads: wrapperspb.Int64(2), MaxEnqueuedBatches: wrapperspb.Int64(bc.queue)},
				IntraOp: 1, InterOp: 2, GRPCMaxThreads: 256,
				Load: Load{Concurrency: 64}, Calibration: testCalibration(), Seed: 1,
			}
			var reqs int64
			for b.Loop() {
				r, err := Run(context.Background(), tr)
				if err != nil {
					b.Fatal(err)
				}
				reqs += r.Requests
			}
			b.ReportMetric(float64(reqs)/float64(b.N), "requests/trial")
		})
	}
	_ = time.Second
}
