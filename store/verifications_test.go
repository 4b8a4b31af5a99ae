package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// TestVerifications stores soaks beside a run and reads them back in
// order; a study that never ran one (as in a store written before verify
// existed) has none, and a soak of an unknown run is refused.
func TestVerifications(t *testing.T) {
	db := storetest.Open(t)
	r := newRun(t, db, "s")
	got, err := db.Verifications(ctx, "s")
	if err != nil || len(got) != 0 {
		t.Fatalf("before any soak: %v, %v; want none and no error", got, err)
	}
	if _, err := db.LatestVerification(ctx, "s", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("latest before any soak: %v, want ErrNotFound", err)
	}
	want := []store.Verification{
		{Study: "s", Run: r.ID, Recommendation: 1, Source: "recommendation 1", Verdict: store.VerifyFailed,
			Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Duration: 6 * time.Second, Interval: 2 * time.Second,
			Rate: 100, SLO: 50 * time.Millisecond, Quantile: 0.99, MaxErrorRate: 0.0001,
			Failures: []string{"interval 2: P99 80ms over the SLO 50ms"},
			Causes:   []store.Cause{{Name: "queue_full", Detail: "12 rejected"}},
			Errors:   map[string]int64{"Unavailable": 12},
			Intervals: []store.VerifyInterval{{Start: 0, Dur: 2 * time.Second, Sent: 200, OK: 200, Rate: 100, P50: time.Millisecond, Quantile: 3 * time.Millisecond},
				{Start: 2 * time.Second, Dur: 2 * time.Second, Sent: 200, OK: 188, Errors: 12, Rejected: 12, Over: true}}},
		{Study: "s", Source: "--config b.config", Verdict: store.VerifyPassed, Rate: 10, Intervals: []store.VerifyInterval{}},
	}
	for i := range want {
		v := want[i]
		if err := db.AddVerification(ctx, &v); err != nil {
			t.Fatal(err)
		}
		if v.Seq != uint64(i+1) {
			t.Errorf("verification %d got seq %d", i+1, v.Seq)
		}
		want[i].Seq = v.Seq
	}
	got, err = db.Verifications(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verifications (-want +got):\n%s", diff)
	}
	last, err := db.LatestVerification(ctx, "s", r.ID)
	if err != nil || last.Seq != 1 {
		t.Errorf("latest of run %d: %+v, %v; want seq 1", r.ID, last, err)
	}
	if last, err = db.LatestVerification(ctx, "s", 0); err != nil || last.Seq != 2 {
		t.Errorf("latest of the study: %+v, %v; want seq 2", last, err)
	}
	bad := store.Verification{Study: "s", Run: 99, Verdict: store.VerifyPassed}
	if err := db.AddVerification(ctx, &bad); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("soak of run 99: %v, want ErrNotFound", err)
	}
	if err := db.AddVerification(ctx, &store.Verification{Study: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("soak of an unknown study: %v, want ErrNotFound", err)
	}
}
