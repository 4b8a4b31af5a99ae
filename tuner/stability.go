package tuner

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat"

	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/store"
)

// Limits past which a run calls the machine unstable (issue 15 item 12):
// a busy or oversubscribed host widens every measurement, and a run on
// one ends with no recommendation, or a weak one, for reasons that have
// nothing to do with the configurations.
const (
	// maxBaselineCV bounds the spread of the baseline's repeats (standard
	// deviation over mean): the same configuration, restarted and
	// measured again, moved more than this.
	maxBaselineCV = 0.10
	// maxSteal bounds the share of CPU time a hypervisor gave to other
	// guests over the run.
	maxSteal = 0.05
	// maxLoadPerCore bounds the one-minute load average per core at the
	// run's end; the tuned server and the load generator themselves keep
	// about one runnable thread per core busy, so only well beyond that
	// means other work.
	maxLoadPerCore = 2.0
)

// hostReading is what the run read of the machine: its CPU counters at
// the start, and a way to read them again.
type hostReading struct {
	read  func() probe.HostSample
	start probe.HostSample
}

// judgeStability is the rule: from the baseline's repeated objective
// values, the stolen share of CPU time and the load per core (nil when
// unknown), and the study's repeats (for the advice), the figures and,
// when one passed its limit, a note saying so and what to do.
func judgeStability(baseline []float64, steal, loadPerCore *float64, repeats int) *store.Stability {
	st := &store.Stability{Steal: steal, LoadPerCore: loadPerCore}
	var why []string
	if len(baseline) >= 2 {
		mean, sd := stat.MeanStdDev(baseline, nil)
		if mean != 0 && !math.IsNaN(sd) {
			cv := sd / math.Abs(mean)
			st.BaselineCV, st.BaselineRepeats = &cv, len(baseline)
			if cv > maxBaselineCV {
				why = append(why, fmt.Sprintf("the baseline's %d repeats spread %.0f%% (coefficient of variation; a steady machine stays under %.0f%%)",
					len(baseline), 100*cv, 100*maxBaselineCV))
			}
		}
	}
	if steal != nil && *steal > maxSteal {
		why = append(why, fmt.Sprintf("%.0f%% of the CPU time was stolen by the hypervisor (over %.0f%%)", 100**steal, 100*maxSteal))
	}
	if loadPerCore != nil && *loadPerCore > maxLoadPerCore {
		why = append(why, fmt.Sprintf("the load average was %.1f per core (over %.0f)", *loadPerCore, maxLoadPerCore))
	}
	if len(why) == 0 {
		return st
	}
	st.Unstable = true
	st.Note = fmt.Sprintf("the machine looked unstable: %s. Measurements this noisy cannot tell configurations apart: "+
		"run on a quieter host (no other jobs; a dedicated or CPU-pinned machine), or raise confirmation.repeats (now %d) and confirmation.max_repeats",
		strings.Join(why, "; "), repeats)
	return st
}

// judgeRun records on run what the machine looked like during it: the
// spread of conf's baseline (when it was measured), and the CPU steal and
// load since the run started.
func (t *Tuner) judgeRun(run *store.Run, conf *Confirmation) *store.Stability {
	var samples []float64
	if conf != nil {
		samples = conf.Baseline.Samples
	}
	var steal, load *float64
	if t.host.read != nil {
		now := t.host.read()
		if v, ok := now.StealSince(t.host.start); ok {
			steal = &v
		}
		if now.LoadOK && t.cores > 0 {
			v := now.Load1 / float64(t.cores)
			load = &v
		}
	}
	st := judgeStability(samples, steal, load, t.study.Confirmation.Repeats)
	run.Stability = st
	if st.Unstable {
		t.log.Warn("the machine looked unstable", "run", run.ID, "note", st.Note)
	}
	return st
}

// unstableNote is what a run's detail adds when it ended without a
// (confident) recommendation on a machine that looked unstable.
func unstableNote(st *store.Stability) string {
	if st == nil || !st.Unstable {
		return ""
	}
	return "; " + st.Note
}

// weakGain reports whether a recommendation's gain over the baseline is
// not established: its interval reaches zero or below.
func weakGain(conf *Confirmation) bool {
	return conf != nil && conf.Gain != nil && conf.Gain.Low <= 0
}
