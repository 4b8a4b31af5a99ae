package emulator

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchtune/batchtune/emulator/model"
	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/tfserving"
)

var update = flag.Bool("update", false, "rewrite the bundled models' warmup files")

// rankerWarmup is the bundled ranker's warmup file content: four
// single-candidate requests, the shape real ranking traffic sends, with
// features drawn from a fixed seed.
func rankerWarmup() []*tfserving.PredictRequest {
	rng := rand.New(rand.NewPCG(2024, 7))
	var reqs []*tfserving.PredictRequest
	for i := 0; i < 4; i++ {
		vals := make([]float32, 256)
		for j := range vals {
			vals[j] = float32(rng.NormFloat64())
		}
		reqs = append(reqs, &tfserving.PredictRequest{
			ModelSpec: &tfserving.ModelSpec{Name: "ranker", SignatureName: "serving_default"},
			Inputs: map[string]*tfserving.TensorProto{"features": {
				Dtype:       tfserving.DataType_DT_FLOAT,
				TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 1}, {Size: 256}}},
				FloatVal:    vals,
			}},
		})
	}
	return reqs
}

// TestBundledWarmupFile: the committed warmup file is what rankerWarmup
// writes (go test ./emulator -run TestBundledWarmupFile -update rewrites
// it), and the ranker loads with it replayed.
func TestBundledWarmupFile(t *testing.T) {
	base := filepath.Join("..", "configs", "models", "ranker")
	path := filepath.Join(base, "1", warmup.FileName)
	var want bytes.Buffer
	if err := warmup.Write(&want, rankerWarmup()); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%s differs from rankerWarmup(); run with -update", path)
	}
	if testing.Short() {
		return
	}
	m, err := model.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	// Load the ranker with warmup on and check that size 1 is warm.
	cfg := Config{ModelName: "ranker", ModelBasePath: base, EnableBatching: true, EnableModelWarmup: true, WarmupIterations: 1}
	params := &tfserving.BatchingParameters{}
	sv, err := load(context.Background(), withDefaults(cfg), params, newMetrics(), discard())
	if err != nil {
		t.Fatal(err)
	}
	defer sv.rt.Close()
	defer sv.close()
	type warmer interface{ WarmSizes() []int }
	sizes := sv.dev.(warmer).WarmSizes()
	if len(sizes) != 1 || sizes[0] != 1 {
		t.Errorf("warm sizes after replaying %s = %v, want [1]", path, sizes)
	}
	if m.WarmupFile() == "" {
		t.Error("model.WarmupFile() does not see the file")
	}
}
