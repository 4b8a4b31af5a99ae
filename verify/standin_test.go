package verify_test

// Soaks against the bundled stand-in (cmd/tfs-emulator, built from this
// tree) through the process runtime: one that passes at a low rate, one
// that fails for a stated reason (a one-batch queue at a rate far over
// it). About 25 s in all.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/emulatortest"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
	_ "github.com/batchtune/batchtune/tuner/runtime/process" // registers target.runtime process
	"github.com/batchtune/batchtune/verify"
)

func TestMain(m *testing.M) { emulatortest.Main(m) }

// standInStudy is the ranker model of the stand-in as a process. The SLO
// is loose (300 ms against a P99 near 40 ms at the passing rate) so that a
// loaded machine cannot turn the passing soak into a failure.
func standInStudy(t *testing.T) *configs.Study {
	t.Helper()
	doc := fmt.Sprintf(`name: verify-standin
target:
  runtime: process
  model: {name: ranker, base_path: %s}
  start_timeout: 20s
  process: {binary: %s}
load:
  connections: 2
  request_timeout: 2s
  payload:
    batch: 1
    inputs: [{name: features, dtype: DT_FLOAT, shape: [-1, 256]}]
  warmup: {requests: 50, max_duration: 5s}
slo:
  latency: 300ms
`, emulatortest.ModelCopy(t, "ranker", nil), emulatortest.Emulator(t))
	s, err := configs.ParseStudy(filepath.Join(t.TempDir(), "verify.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSoakAgainstTheStandIn(t *testing.T) {
	s := standInStudy(t)
	rt, err := runtime.New(s.Target, runtime.Options{Study: s.Name, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Restore(context.Background()); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	opts := func(rate float64) verify.Options {
		return verify.Options{Rate: rate, Duration: 6 * time.Second, Interval: 2 * time.Second, Cores: 2}
	}
	flags := []string{"--grpc_max_threads=64"}

	t.Run("passes at a low rate", func(t *testing.T) {
		sub := verify.Subject{Source: "test", Flags: flags, Batching: []byte("max_batch_size { value: 16 }\nbatch_timeout_micros { value: 2000 }\nmax_enqueued_batches { value: 16 }\nnum_batch_threads { value: 2 }\n")}
		v, err := verify.Run(ctx, s, rt, sub, opts(50))
		if err != nil {
			t.Fatal(err)
		}
		logSoak(t, v)
		if v.Verdict != store.VerifyPassed {
			t.Fatalf("verdict %s %q, want passed", v.Verdict, v.Failures)
		}
		if len(v.Intervals) != 3 {
			t.Fatalf("%d intervals, want 3 of 2 s in 6 s", len(v.Intervals))
		}
		var ok int64
		for i, iv := range v.Intervals {
			// Contiguous: each starts where the last ended, and together
			// they hold every successful request of the soak.
			if iv.Start != time.Duration(i)*2*time.Second || iv.Dur != 2*time.Second {
				t.Errorf("interval %d: %s+%s, want %s+2s", i+1, iv.Start, iv.Dur, time.Duration(i)*2*time.Second)
			}
			// 100 requests are due per interval; the schedule is kept
			// to within a tick.
			if iv.Sent < 90 || iv.Sent > 110 {
				t.Errorf("interval %d sent %d, want about 100", i+1, iv.Sent)
			}
			if iv.Quantile <= 0 || iv.Quantile < iv.P50 || iv.MeanBatch <= 0 {
				t.Errorf("interval %d: P99 %s P50 %s mean batch %g: want measured latency and scraped metrics", i+1, iv.Quantile, iv.P50, iv.MeanBatch)
			}
			ok += iv.OK
		}
		if ok != v.OK {
			t.Errorf("intervals hold %d successes, the soak %d: want every one in an interval", ok, v.OK)
		}
	})

	t.Run("fails on queue rejections", func(t *testing.T) {
		// One request per batch, one thread, a one-batch queue: the
		// stand-in serves well under 200 req/s so, and refuses the rest.
		sub := verify.Subject{Source: "tiny queue", Flags: flags, Batching: []byte("max_batch_size { value: 1 }\nbatch_timeout_micros { value: 0 }\nmax_enqueued_batches { value: 1 }\nnum_batch_threads { value: 1 }\n")}
		v, err := verify.Run(ctx, s, rt, sub, opts(600))
		if err != nil {
			t.Fatal(err)
		}
		logSoak(t, v)
		if v.Verdict != store.VerifyFailed {
			t.Fatalf("verdict %s %q, want failed", v.Verdict, v.Failures)
		}
		if len(v.Causes) == 0 || v.Causes[0].Name != "queue_full" {
			t.Fatalf("causes %+v, want queue_full first", v.Causes)
		}
		var rejected float64
		for _, iv := range v.Intervals {
			rejected += iv.Rejected
		}
		// The server's own count of refusals and the client's count of
		// UNAVAILABLE answers agree within the scrapes' timing.
		if n := v.Errors["Unavailable"]; n < 100 || rejected < 0.9*float64(n) || rejected > 1.1*float64(n) {
			t.Errorf("client saw %d UNAVAILABLE, the server counted %.0f rejections: want many, and the two within 10%%", n, rejected)
		}
	})
}

func logSoak(t *testing.T, v *store.Verification) {
	t.Helper()
	for i, iv := range v.Intervals {
		t.Logf("interval %d: sent %d ok %d errors %d P50 %s P99 %s batch %.1f queue %.0f%% rejected %.0f", i+1, iv.Sent, iv.OK, iv.Errors, iv.P50, iv.Quantile, iv.MeanBatch, 100*iv.QueueShare, iv.Rejected)
	}
	t.Logf("verdict %s failures %q causes %+v note %q", v.Verdict, v.Failures, v.Causes, v.Note)
}
