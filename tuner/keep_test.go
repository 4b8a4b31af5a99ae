package tuner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestKeepTheBaseline: when the candidates the search found break the SLO
// on re-measurement while the baseline meets it in every repeat, the run
// says to keep the baseline, not that no configuration met the SLO.
func TestKeepTheBaseline(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "prod.config")
	if err := os.WriteFile(base, []byte("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testStudy(t, "")
	s.Confirmation.Baseline = base
	db := storetest.Open(t)
	rt := &fakeRuntime{}
	var mu sync.Mutex
	calls := 0
	p := &fakeProber{rt: rt, surface: func(b configs.Batching) (float64, time.Duration) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		q, p99 := testSurface(b)
		// After the 12 search trials, everything but the baseline's
		// configuration breaks the 30 ms SLO.
		if n > s.Search.Trials && !(b.MaxBatchSize == 8 && b.BatchTimeoutMicros == 0) {
			p99 += 40 * time.Millisecond
		}
		return q, p99
	}}
	rep, err := newTestTuner(t, s, db, rt, p, nil).Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommendation != nil || rep.Run.Outcome != store.OutcomeNoFeasible {
		t.Fatalf("outcome %s, recommendation %+v: want none", rep.Run.Outcome, rep.Recommendation)
	}
	d := rep.Run.Detail
	if !strings.HasPrefix(d, "keep the baseline: baseline ("+base+") met the SLO in 3 of 3") || strings.Contains(d, "no configuration met the SLO") {
		t.Errorf("detail %q: want keep the baseline", d)
	}
}
