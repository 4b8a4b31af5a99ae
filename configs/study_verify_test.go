package configs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestScheduleVerify reads schedule.verify and names each bad field with
// its line.
func TestScheduleVerify(t *testing.T) {
	s, err := ParseStudy("study.yaml", []byte(minimal+"objective: max_throughput\nschedule:\n  verify: {enabled: true, rate: 250, duration: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v := s.Schedule.Verify
	if !v.Enabled || v.Rate != 250 || v.Duration.D() != time.Minute || v.Interval.D() != 10*time.Second || v.Headroom != 0.65 || v.MaxErrorRate != 0.0001 {
		t.Errorf("schedule.verify = %+v, want the given keys over the defaults", v)
	}
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		// Bad values, each named.
		{"values", "schedule:\n  verify:\n    duration: 500ms\n    interval: 1500ms\n    rate: -1\n    headroom: 1.5\n    max_error_rate: 0\n", []string{
			"10 schedule.verify.duration: must be at least 1s",
			"11 schedule.verify.interval: must be a whole number of seconds",
			"12 schedule.verify.rate: must be >= 0",
			"13 schedule.verify.headroom: must be in (0, 1]",
			"14 schedule.verify.max_error_rate: must be in (0, 1)",
		}},
		// An interval longer than the soak.
		{"interval", "schedule:\n  verify: {duration: 10s, interval: 20s}\n", []string{"9 schedule.verify.interval: 20s is longer than schedule.verify.duration 10s"}},
		// The default rate needs a measured capacity.
		{"rate needs capacity", "objective: max_throughput\nschedule:\n  verify: {enabled: true}\n", []string{"10 schedule.verify.rate: is required with objective max_throughput"}},
		// A misspelt key.
		{"unknown key", "schedule:\n  verify: {enabeld: true}\n", []string{"9 schedule.verify.enabeld: unknown key"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStudy("study.yaml", []byte(minimal+tt.doc))
			var ps StudyProblems
			if !errors.As(err, &ps) {
				t.Fatalf("error %v is not StudyProblems", err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, fmt.Sprintf("%d %s: %s", p.Line, p.Field, p.Msg))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("problem %d:\n got %s\nwant %s...", i, got[i], tt.want[i])
				}
			}
		})
	}
}
