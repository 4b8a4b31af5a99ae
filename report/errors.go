package report

import "errors"

// ErrNoRuns is returned by Build for a study that has no run yet.
var ErrNoRuns = errors.New("report: the study has no runs")
