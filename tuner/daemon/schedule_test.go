package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/daemon"
)

func TestScheduleNext(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name      string
		cron, tz  string
		after     string
		wantUTC   []string // the next few times, in UTC
		wantLocal string   // the first one as the zone writes it
	}{
		// A nightly job in UTC.
		{"utc nightly", "0 3 * * *", "UTC", "2026-06-01T12:00:00Z",
			[]string{"2026-06-02T03:00:00Z", "2026-06-03T03:00:00Z"}, "03:00 UTC"},
		// 03:00 in Berlin is 02:00 UTC in winter, 01:00 UTC in summer: the
		// clocks go forward on 2026-03-29 and the job follows local time.
		{"berlin across DST", "0 3 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}, "03:00 CET"},
		// A descriptor.
		{"daily descriptor in New York", "@daily", "America/New_York", "2026-01-10T12:00:00Z",
			[]string{"2026-01-11T05:00:00Z", "2026-01-12T05:00:00Z"}, "00:00 EST"},
		// The compressed schedule tests use.
		{"every few seconds", "@every 3s", "UTC", "2026-01-10T12:00:00Z",
			[]string{"2026-01-10T12:00:03Z", "2026-01-10T12:00:06Z"}, "12:00 UTC"},
		// Weekdays only: Friday evening to Monday.
		{"weekdays", "30 6 * * 1-5", "UTC", "2026-05-01T20:00:00Z",
			[]string{"2026-05-04T06:30:00Z", "2026-05-05T06:30:00Z"}, "06:30 UTC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := daemon.ParseSchedule(configs.Schedule{Cron: tc.cron, TimeZone: tc.tz})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			at := utc(tc.after)
			for range tc.wantUTC {
				at = s.Next(at)
				got = append(got, at.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.wantUTC, got); diff != "" {
				t.Errorf("next times (-want +got):\n%s", diff)
			}
			if first := s.Next(utc(tc.after)).Format("15:04 MST"); first != tc.wantLocal {
				t.Errorf("first time in the zone: got %s, want %s", first, tc.wantLocal)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := daemon.ParseSchedule(configs.Schedule{TimeZone: "UTC"})
	if err != nil || s != nil {
		t.Errorf("no cron: got %v, %v; want nil, nil (on demand only)", s, err)
	}
	if _, err := daemon.ParseSchedule(configs.Schedule{Cron: "61 * * * *", TimeZone: "UTC"}); err == nil {
		t.Error("minute 61: want an error")
	}
	_, err = daemon.ParseSchedule(configs.Schedule{Cron: "@daily", TimeZone: "Mars/Olympus"})
	if err == nil || !strings.Contains(err.Error(), "schedule.time_zone") {
		t.Errorf("unknown zone: got %v, want an error naming schedule.time_zone", err)
	}
}
