package configs

import (
	"math"
	"time"
)

// ScheduleVerify is the acceptance soak the daemon runs after an accepted
// change and before the rollout command (seed 001 §6.2): the new
// configuration is held at Rate for Duration and must keep the SLO's
// quantile under slo.latency in every Interval, the error rate under
// MaxErrorRate, and the rate; otherwise the incumbent is kept.
type ScheduleVerify struct {
	Enabled  bool     `yaml:"enabled" json:"enabled"`
	Duration Duration `yaml:"duration" json:"duration"`
	Interval Duration `yaml:"interval" json:"interval"`
	// Rate is the rate held, req/s; 0 means the recommendation's capacity
	// lower bound x Headroom, known only under objective max_capacity.
	Rate         float64 `yaml:"rate" json:"rate"`
	Headroom     float64 `yaml:"headroom" json:"headroom"`
	MaxErrorRate float64 `yaml:"max_error_rate" json:"max_error_rate"`
}

// defaultScheduleVerify is off, and when on: five minutes in 10 s
// intervals at 65% of the capacity lower bound (capacity.DefaultHeadroom,
// seed 001 §3.3), errors under 0.01%.
func defaultScheduleVerify() ScheduleVerify {
	return ScheduleVerify{
		Duration:     Duration(5 * time.Minute),
		Interval:     Duration(10 * time.Second),
		Headroom:     0.65,
		MaxErrorRate: 0.0001,
	}
}

// scheduleVerify checks schedule.verify. Its values are checked whether
// or not it is enabled, so that turning it on never reveals an old mistake.
func (chk *studyCheck) scheduleVerify() {
	v := chk.s.Schedule.Verify
	const f = "schedule.verify."
	if v.Duration < Duration(time.Second) {
		chk.ps.Add(f+"duration", "must be at least 1s, got %s", v.Duration)
	}
	switch {
	case v.Interval < Duration(time.Second) || v.Interval%Duration(time.Second) != 0:
		chk.ps.Add(f+"interval", "must be a whole number of seconds, got %s", v.Interval)
	case v.Interval > v.Duration && v.Duration >= Duration(time.Second):
		chk.ps.Add(f+"interval", "%s is longer than schedule.verify.duration %s", v.Interval, v.Duration)
	}
	if math.IsNaN(v.Rate) || math.IsInf(v.Rate, 0) || v.Rate < 0 {
		chk.ps.Add(f+"rate", "must be >= 0 requests per second (0: capacity x headroom), got %v", v.Rate)
	}
	chk.fraction(f+"headroom", v.Headroom, true, false)
	chk.fraction(f+"max_error_rate", v.MaxErrorRate, true, true)
	if v.Enabled && v.Rate == 0 && chk.s.Objective != ObjectiveMaxCapacity {
		chk.ps.Add(f+"rate", "is required with objective %s: only max_capacity measures the capacity the default rate is taken from", chk.s.Objective)
	}
}
