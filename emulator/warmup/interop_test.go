package warmup_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/probe/tfrecord"
	"github.com/batchtune/batchtune/tfserving"
)

// TestProbeReadsBundledWarmup: the probe's independently written TFRecord
// reader reads the stand-in's bundled warmup file, record for record.
func TestProbeReadsBundledWarmup(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "models", "ranker", "1", warmup.FileName))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := tfrecord.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("probe reader: %v", err)
	}
	ours, err := warmup.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(ours) || len(recs) == 0 {
		t.Fatalf("probe read %d records, warmup.Read %d", len(recs), len(ours))
	}
	for i, rec := range recs {
		var pl tfserving.PredictionLog
		if err := proto.Unmarshal(rec, &pl); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !proto.Equal(pl.GetPredictLog().GetRequest(), ours[i]) {
			t.Errorf("record %d differs between the readers", i)
		}
	}
}
