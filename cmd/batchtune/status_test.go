package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/store"
)

// TestStatusFromStoreShowsADegradedIncumbent: with no daemon answering,
// status reads the store, and the latest run that re-measured the
// incumbent says whether it is degraded, even when later runs did not
// re-measure it.
func TestStatusFromStoreShowsADegradedIncumbent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "batchtune.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutStudy(ctx, &store.Study{Name: "s", SpecHash: "h"}); err != nil {
		t.Fatal(err)
	}
	finished := func(deg *float64, degraded bool) {
		t.Helper()
		r := &store.Run{Study: "s", Kind: store.KindScheduled, SpecHash: "h"}
		if err := db.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.State, r.Outcome, r.Ended = store.RunFinished, store.OutcomeKept, time.Now().UTC()
		r.Degradation, r.Degraded = deg, degraded
		if err := db.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	healthy, worse := 0.01, 0.25
	finished(&healthy, false)
	finished(&worse, true)
	finished(nil, false) // a run that did not re-measure the incumbent
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := statusFromStore(ctx, path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Studies) != 1 || !rep.Studies[0].Degraded || rep.Studies[0].Degradation != worse {
		t.Fatalf("studies %+v: want s degraded by %v", rep.Studies, worse)
	}
	var out bytes.Buffer
	printStatus(&out, rep, time.Now())
	if !strings.Contains(out.String(), "DEGRADED") {
		t.Errorf("status output does not say DEGRADED:\n%s", out.String())
	}
}
