package main

import (
	"testing"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/search"
	"github.com/batchtune/batchtune/search/replay"
)

// A surface of one parameter: max_batch_size 1..5, P99 SLO 10 ms.
func refineSurface(t *testing.T) *replay.Surface {
	t.Helper()
	s, err := replay.NewSurface(replay.Header{
		Format: "batchtune-surface/1", Name: "toy", Objective: search.MaxThroughput,
		Concurrency: 8, SLO: replay.Duration(10e6), ErrorBudget: 0.01, Cores: 2,
		Fixed: map[string]int64{search.GRPCMaxThreads: 64},
		Space: []configs.ParamSpec{{Name: search.MaxBatchSize, Values: []int64{1, 2, 3, 4, 5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	add := func(mbs int64, qps, p99us float64, ref bool) {
		if err := s.Add(replay.Measurement{Config: []int64{mbs}, QPS: qps, P99Micros: p99us, Reference: ref}); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 1000, 5000, false) // the best
	add(2, 900, 9000, false)  // within 85%, feasible
	add(3, 870, 12000, false) // within 85%, over the SLO but within 25% of it
	add(4, 950, 20000, false) // within 85%, far over the SLO
	add(5, 780, 5000, false)  // below 85% of 1000, within 85% of 900
	return s
}

func TestFindContenders(t *testing.T) {
	s := refineSurface(t)
	got, err := findContenders(s, 0.85, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 2, 3}
	if len(got) != len(want) {
		t.Fatalf("contenders %v, want max_batch_size %v", got, want)
	}
	for i, c := range got {
		if v, _ := c.Get(search.MaxBatchSize); v != want[i] {
			t.Fatalf("contender %d is %s, want max_batch_size %d", i, c, want[i])
		}
	}
}

// Once the best has reference runs that pull it down, the next pass finds
// what came within reach of the new best, and leaves refined ones alone.
func TestFindContendersAfterTheBestMoved(t *testing.T) {
	s := refineSurface(t)
	for range 4 { // the best was lucky: its truth is 840
		if err := s.Add(replay.Measurement{Config: []int64{1}, QPS: 800, P99Micros: 5000, Reference: true}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := findContenders(s, 0.85, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	// 900 is now the best, which brings 780 within 85%; the refined
	// max_batch_size 1 (840) is not refined again.
	var mbs []int64
	for _, c := range got {
		v, _ := c.Get(search.MaxBatchSize)
		mbs = append(mbs, v)
	}
	if len(mbs) != 3 || mbs[0] != 2 || mbs[1] != 3 || mbs[2] != 5 {
		t.Fatalf("second pass contenders %v, want max_batch_size [2 3 5]", mbs)
	}
}
