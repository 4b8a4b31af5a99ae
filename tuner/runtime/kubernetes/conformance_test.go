package kubernetes_test

import (
	"testing"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

// TestConformance runs the runtime conformance suite against the
// kubernetes runtime on the test cluster, with the stand-in's image.
func TestConformance(t *testing.T) {
	cli, _ := cluster(t)
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T, stateDir string) runtime.Runtime {
			return newRuntime(t, cli, stateDir, nil)
		},
		Leftovers: func(t *testing.T, stateDir string) []string {
			return leftovers(t, cli, stateDir)
		},
		Kill: func(t *testing.T, s runtime.Server) {
			killContainer(t, cli, s)
		},
		Model:       si.Model,
		Good:        si.Good,
		Rejected:    si.Rejected,
		RejectedLog: si.RejectedLog,
	})
}
