package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner"
)

// Exit statuses (README "Exit status").
const (
	exitOK               = 0
	exitError            = 1 // the command failed
	exitUsage            = 2 // bad flags or arguments: nothing ran
	exitNoRecommendation = 3 // tune ran to its end and recommends nothing
	exitInterrupted      = 130
)

// exitError is an error with the status the process exits with.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// usageErr marks err as a usage error (exit status 2).
func usageErr(err error) error { return &statusError{code: exitUsage, err: err} }

// exitStatus maps a command's error to the process's exit status.
func exitStatus(err error) int {
	if err == nil {
		return exitOK
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		// urfave's own: an unknown command or help topic.
		return exitUsage
	}
	return exitError
}

// markUsageErrors makes flag-parsing errors of every command usage errors.
func markUsageErrors(app *cli.App) {
	onUsage := func(_ *cli.Context, err error, _ bool) error { return usageErr(err) }
	app.OnUsageError = onUsage
	for _, c := range app.Commands {
		if c.OnUsageError == nil {
			c.OnUsageError = onUsage
		}
	}
}

// noRecommendation is the error of a tune that ended with no
// recommendation: exit status 3, and what to try next.
func noRecommendation(s *configs.Study, rep *tuner.Report) error {
	return &statusError{code: exitNoRecommendation, err: errors.New(noRecommendationAdvice(s, rep))}
}

// noRecommendationAdvice says why nothing was recommended and what to try:
// keep the baseline when it met the SLO; else the configuration that came
// closest and by how much it missed, and looser SLO, more trials or a
// quieter machine.
func noRecommendationAdvice(s *configs.Study, rep *tuner.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %d ended with no recommendation", rep.Run.ID)
	if conf := rep.Confirmation; conf != nil && conf.Baseline.Repeats > 0 && conf.Baseline.Feasible == conf.Baseline.Repeats {
		fmt.Fprintf(&b, ": keep the baseline. %s met the SLO in all %d repeats and no configuration tried beat it with confidence; nothing was exported",
			conf.Baseline.Label, conf.Baseline.Repeats)
		return b.String() + unstableAdvice(rep)
	}
	if st := rep.Run.Stability; st != nil && st.Unstable {
		// The machine, not the configurations, is the likelier cause.
		fmt.Fprintf(&b, ": %s", st.Note)
		return b.String()
	}
	slo := s.SLO.Latency.D()
	bestLabel, bestMiss := closestMiss(rep, float64(slo))
	if bestLabel != "" {
		fmt.Fprintf(&b, ": the closest was %s, whose P99 missed the %s SLO by %.0f%%", bestLabel, slo, 100*bestMiss)
	}
	next := rep.Run.Budget * 2
	next = min(max(next, 2), configs.MaxTrials)
	fmt.Fprintf(&b, ". Try a looser slo.latency, more trials (--trials %d), or a quieter machine (other jobs on it widen latency)", next)
	return b.String() + strictAdvice(s, rep)
}

// strictAdvice names the stricter verdict when it is what turned a
// candidate down: under confirmation.clean_repeats a candidate that met
// the SLO in most of its repeats is rejected for one breach.
func strictAdvice(s *configs.Study, rep *tuner.Report) string {
	conf := rep.Confirmation
	if s.Confirmation.CleanRepeats == 0 || conf == nil {
		return ""
	}
	for _, c := range conf.Candidates {
		if c.Feasible > 0 && c.Feasible < c.Repeats {
			return fmt.Sprintf(". %s met the SLO in %d of %d repeats: confirmation.clean_repeats (%d) forgives no breach (at 0, one breach in three is forgiven from the fourth repeat on)",
				c.Label, c.Feasible, c.Repeats, s.Confirmation.CleanRepeats)
		}
	}
	return ""
}

// unstableAdvice is the machine's note, for a run that saw it unstable.
func unstableAdvice(rep *tuner.Report) string {
	if st := rep.Run.Stability; st != nil && st.Unstable {
		return ". Also, " + st.Note
	}
	return ""
}

// closestMiss finds the measured configuration whose P99 came closest to
// the SLO (slo in ns): the confirmation's candidates, else the search's
// trials; miss is P99/slo - 1.
func closestMiss(rep *tuner.Report, slo float64) (string, float64) {
	label, miss := "", math.Inf(1)
	if conf := rep.Confirmation; conf != nil {
		for _, c := range append(append([]tuner.Candidate(nil), conf.Candidates...), conf.Baseline) {
			if c.P99 > 0 && float64(c.P99)/slo-1 < miss {
				label, miss = c.Label+" ("+compactConfig(c.Config)+")", float64(c.P99)/slo-1
			}
		}
	}
	if label == "" {
		for _, tr := range rep.Trials {
			if tr.State == store.TrialSucceeded && tr.Summary.P99 > 0 && float64(tr.Summary.P99)/slo-1 < miss {
				label, miss = fmt.Sprintf("trial %d (%s)", tr.Seq, compactConfig(tr.Config)), float64(tr.Summary.P99)/slo-1
			}
		}
	}
	if label == "" || miss <= 0 {
		return "", 0
	}
	return label, miss
}
