package process_test

import (
	"context"
	"testing"
	"time"

	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	"github.com/batchtune/batchtune/tuner/runtime/process"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

// BenchmarkRestart measures a trial restart on the process runtime (stop
// the previous server, start, both ports answering):
//
//	go test -run '^$' -bench Restart -benchtime 30x ./tuner/runtime/process/
func BenchmarkRestart(b *testing.B) {
	b.Run("server=fake", func(b *testing.B) {
		rt := newFake(b, b.TempDir(), nil)
		benchOn(b, rt, runtime.Config{Batching: testenv.GoodBatching})
	})
	b.Run("server=stand-in", func(b *testing.B) {
		root := testenv.RepoRoot(b)
		bin := emulatortest.Emulator(b)
		si := testenv.StandIn(b, root)
		rt, err := process.New(process.Options{Binary: bin, ModelName: si.Model, ModelBasePath: si.HostModelPath, StateDir: b.TempDir(), StopGrace: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		benchOn(b, rt, runtime.Config{Batching: si.Good})
	})
}

func benchOn(b *testing.B, rt runtime.Runtime, cfg runtime.Config) {
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Restore(ctx)
	runtimetest.BenchRestart(b, rt, cfg)
}
