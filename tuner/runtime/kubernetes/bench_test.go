package kubernetes_test

import (
	"context"
	"testing"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

// BenchmarkRestart measures one trial restart on the test cluster (delete
// the previous pod, create ConfigMap and pod, wait until the stand-in
// answers at the pod's IP), to compare with the docker and process
// runtimes' BenchmarkRestart (experiments/kubernetes/README.md).
func BenchmarkRestart(b *testing.B) {
	cli, _ := cluster(b)
	dir := b.TempDir()
	rt := newRuntime(b, cli, dir, nil)
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Restore(context.Background())
	si := testenv.StandIn(b, testenv.RepoRoot(b))
	runtimetest.BenchRestart(b, rt, runtime.Config{Batching: si.Good})
}
