package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestQueuePositions: with one run in progress and three queued behind
// it, each queued run reports its own place in the queue (1, 2, 3) in
// the trigger's answer, the daemon's queue, each study's status and the
// API; when the head starts, the others move up.
func TestQueuePositions(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	for _, name := range []string{"a", "b", "c", "d"} {
		// Distinct servers: only max_parallel (1) keeps them waiting.
		r.write(name+".yaml", studyDoc(name, "/bin/"+name, 0, 0, "", "UTC", filepath.Join(r.out, name)))
	}
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.d.Handler(daemon.APIOptions{}))
	t.Cleanup(srv.Close)
	r.start()

	// trigger queues a run through the API, as a client does.
	trigger := func(name string) daemon.QueuedRun {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+daemon.PathAPI+"/studies/"+name+"/runs", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var q daemon.QueuedRun
		if err := json.NewDecoder(resp.Body).Decode(&q); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("trigger %s: %d, %v", name, resp.StatusCode, err)
		}
		return q
	}
	// The first starts at once and says so rather than "queued, 1".
	if q := trigger("a"); q.State != daemon.StateRunning || q.Position != 0 {
		t.Errorf("trigger on an idle daemon: %s at %d, want running (position 0)", q.State, q.Position)
	}
	head := r.runner.next(t)
	triggered := map[string]string{}
	for _, name := range []string{"b", "c", "d"} {
		q := trigger(name)
		triggered[name] = fmt.Sprintf("%s %d", q.State, q.Position)
	}
	if diff := cmp.Diff(map[string]string{"b": "queued 1", "c": "queued 2", "d": "queued 3"}, triggered); diff != "" {
		t.Errorf("what the triggers answered (-want +got):\n%s", diff)
	}
	r.runner.none(t, "a runs; max_parallel is 1")

	// positions reads every view of the queue and checks they agree.
	positions := func() map[string]int {
		t.Helper()
		all, err := r.d.Studies(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fromQueue := map[string]int{}
		for _, q := range all.Queue {
			fromQueue[q.Study] = q.Position
		}
		fromStudies := map[string]int{}
		for _, s := range all.Studies {
			if s.Queued != nil {
				fromStudies[s.Name] = s.Queued.Position
			}
		}
		fromAPI := map[string]int{}
		resp, err := http.Get(srv.URL + daemon.PathAPI + "/studies")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st daemon.StudiesStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Studies {
			if s.Queued != nil {
				fromAPI[s.Name] = s.Queued.Position
			}
		}
		if diff := cmp.Diff(fromQueue, fromStudies); diff != "" {
			t.Errorf("queue and study status disagree (-queue +studies):\n%s", diff)
		}
		if diff := cmp.Diff(fromQueue, fromAPI); diff != "" {
			t.Errorf("queue and API disagree (-queue +api):\n%s", diff)
		}
		return fromQueue
	}
	if diff := cmp.Diff(map[string]int{"b": 1, "c": 2, "d": 3}, positions()); diff != "" {
		t.Errorf("three queued (-want +got):\n%s", diff)
	}

	head.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	b := r.runner.next(t)
	if b.Study.Name != "b" {
		t.Fatalf("after a: %s started, want b", b.Study.Name)
	}
	if diff := cmp.Diff(map[string]int{"c": 1, "d": 2}, positions()); diff != "" {
		t.Errorf("after b started (-want +got):\n%s", diff)
	}
	if _, err := r.d.Cancel(context.Background(), "c", 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"d": 1}, positions()); diff != "" {
		t.Errorf("after c was cancelled (-want +got):\n%s", diff)
	}
	b.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.runner.next(t).finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.waitFor("all idle", func() bool { return r.state("d") == daemon.StateIdle })
}

// TestRunKinds: a run the schedule started is stored as scheduled, one
// queued through the API as api, and the study's status and the API's
// runs say which.
func TestRunKinds(t *testing.T) {
	r := newRig(t, at(t, "2026-01-01T00:00:30Z"), nil, nil)
	r.write("s.yaml", studyDoc("s", "/bin/a", 0, 0, "0 1 * * *", "UTC", filepath.Join(r.out, "s")))
	if _, err := r.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.d.Handler(daemon.APIOptions{}))
	t.Cleanup(srv.Close)
	r.start()

	r.clock.Set(at(t, "2026-01-01T01:00:00Z"))
	nightly := r.runner.next(t)
	nightly.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.waitFor("the nightly run to end", func() bool { return r.state("s") == daemon.StateIdle })
	if got := r.status("s").LastRun.Kind; got != store.KindScheduled {
		t.Errorf("the nightly run's kind in the status: %s, want scheduled", got)
	}

	if _, err := r.d.Trigger("s", daemon.TriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	byAPI := r.runner.next(t)
	if byAPI.Opts.Kind != store.KindAPI {
		t.Errorf("the triggered run's options say %q, want api", byAPI.Opts.Kind)
	}
	byAPI.finishWith(ending{outcome: store.OutcomeKept, objective: 1})
	r.waitFor("the API's run to end", func() bool { return r.state("s") == daemon.StateIdle })
	if got := r.status("s").LastRun.Kind; got != store.KindAPI {
		t.Errorf("the API's run's kind in the status: %s, want api", got)
	}

	resp, err := http.Get(srv.URL + daemon.PathAPI + "/studies/s/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var runs []store.Run
	if err := json.NewDecoder(resp.Body).Decode(&runs); err != nil {
		t.Fatal(err)
	}
	var kinds []store.RunKind
	for _, run := range runs {
		kinds = append(kinds, run.Kind)
	}
	if diff := cmp.Diff([]store.RunKind{store.KindScheduled, store.KindAPI}, kinds); diff != "" {
		t.Errorf("run kinds the API lists (-want +got):\n%s", diff)
	}
}
