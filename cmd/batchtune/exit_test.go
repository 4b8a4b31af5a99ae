package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/confirm"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// TestExitStatus: usage errors 2, other errors 1, no recommendation 3.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"batchtune", "tune", "--no-such-flag"}, exitUsage},
		{[]string{"batchtune", "tune", "--trials", "-3"}, exitUsage},
		{[]string{"batchtune", "tune", "one.yaml", "extra-argument"}, exitUsage},
		{[]string{"batchtune", "tune", "/nonexistent/study.yaml"}, exitError},
		{[]string{"batchtune", "validate", "/nonexistent/study.yaml"}, exitError},
	} {
		if got := run(tc.args); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.args, got, tc.want)
		}
	}
	if got := exitStatus(noRecommendation(testStudyFor(t), &tuner.Report{})); got != exitNoRecommendation || exitNoRecommendation != 3 {
		t.Errorf("no recommendation: exit %d, want 3", got)
	}
	if got := exitStatus(fmt.Errorf("wrapped: %w", usageErr(errors.New("x")))); got != exitUsage {
		t.Errorf("a wrapped usage error: exit %d, want 2", got)
	}
}

func testStudyFor(t *testing.T) *configs.Study {
	t.Helper()
	s, err := configs.ParseStudy("/s.yaml", []byte("name: s\ntarget: {runtime: process, model: {name: m, base_path: /m}, process: {binary: /bin/true}}\nslo: {latency: 50ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNoRecommendationAdvice: keep the baseline when it met the SLO;
// else the closest configuration, by how much it missed, and what to try.
func TestNoRecommendationAdvice(t *testing.T) {
	s := testStudyFor(t)
	cand := func(label string, p99 time.Duration, feasible, repeats int) tuner.Candidate {
		return tuner.Candidate{Label: label, Config: []store.Param{{Name: "max_batch_size", Value: 8}}, P99: p99, Tally: confirm.Tally{Feasible: feasible, Repeats: repeats}}
	}
	baselineMet := &tuner.Report{Run: store.Run{ID: 4, Budget: 10}, Confirmation: &tuner.Confirmation{
		Candidates: []tuner.Candidate{cand("trial 3", 60*time.Millisecond, 1, 3)},
		Baseline:   cand("baseline (tf-defaults)", 20*time.Millisecond, 3, 3)}}
	if got := noRecommendationAdvice(s, baselineMet); !strings.Contains(got, "keep the baseline") || !strings.Contains(got, "all 3 repeats") {
		t.Errorf("baseline met the SLO: %q", got)
	}
	missed := &tuner.Report{Run: store.Run{ID: 5, Budget: 10}, Confirmation: &tuner.Confirmation{
		Candidates: []tuner.Candidate{cand("trial 3", 55*time.Millisecond, 1, 3), cand("trial 7", 70*time.Millisecond, 0, 3)},
		Baseline:   cand("baseline (tf-defaults)", 90*time.Millisecond, 0, 3)}}
	got := noRecommendationAdvice(s, missed)
	for _, want := range []string{"closest was trial 3 (batch=8)", "missed the 50ms SLO by 10%", "looser slo.latency", "--trials 20", "quieter machine"} {
		if !strings.Contains(got, want) {
			t.Errorf("advice %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "clean_repeats") {
		t.Errorf("advice %q names clean_repeats, which the study does not set", got)
	}
	// Under the stricter verdict the advice names it, and the candidate
	// it turned down for one breach.
	s.Confirmation.CleanRepeats = 6
	if got := noRecommendationAdvice(s, missed); !strings.Contains(got, "trial 3 met the SLO in 1 of 3 repeats: confirmation.clean_repeats (6) forgives no breach") {
		t.Errorf("advice under clean_repeats: %q", got)
	}
}

// TestNoRecommendationOnAnUnstableMachine: the advice names the machine's
// figures and what to do when the run saw it unstable.
func TestNoRecommendationOnAnUnstableMachine(t *testing.T) {
	s := testStudyFor(t)
	note := "the machine looked unstable: 15% of the CPU time was stolen by the hypervisor (over 5%). Measurements this noisy cannot tell configurations apart: run on a quieter host"
	rep := &tuner.Report{Run: store.Run{ID: 2, Budget: 10, Stability: &store.Stability{Unstable: true, Note: note}}}
	if got := noRecommendationAdvice(s, rep); !strings.Contains(got, note) {
		t.Errorf("advice %q lacks the machine's note", got)
	}
	rep.Run.Stability.Unstable = false
	if got := noRecommendationAdvice(s, rep); strings.Contains(got, "unstable") {
		t.Errorf("a steady machine was blamed: %q", got)
	}
}
