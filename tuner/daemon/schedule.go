package daemon

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batchtune/batchtune/configs"
)

// Schedule says when a study is due: its cron expression (five fields or a
// descriptor such as @daily or @every 6h) read in its time zone.
type Schedule struct {
	Cron     string
	Location *time.Location
	spec     cron.Schedule
}

// ParseSchedule reads a study's schedule section. It returns nil and no
// error when the study has no cron expression: it runs only on demand.
func ParseSchedule(s configs.Schedule) (*Schedule, error) {
	if s.Cron == "" {
		return nil, nil
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("schedule.time_zone: %w", err)
	}
	spec, err := cron.ParseStandard(s.Cron)
	if err != nil {
		return nil, fmt.Errorf("schedule.cron: %w", err)
	}
	return &Schedule{Cron: s.Cron, Location: loc, spec: spec}, nil
}

// Next returns the first time after t the study is due, in the schedule's
// time zone (daylight-saving changes follow the zone's rules), or the zero
// time when the expression never fires again.
func (s *Schedule) Next(t time.Time) time.Time {
	return s.spec.Next(t.In(s.Location))
}
