package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batchtune/batchtune/store"
)

// shortNames are the tuned parameters' names in tables.
var shortNames = map[string]string{
	"max_batch_size":                  "batch",
	"batch_timeout_micros":            "timeout_us",
	"num_batch_threads":               "threads",
	"max_enqueued_batches":            "queue",
	"tensorflow_intra_op_parallelism": "intra",
	"tensorflow_inter_op_parallelism": "inter",
	"allowed_batch_sizes":             "allowed",
	"grpc_max_threads":                "grpc_threads",
	"rest_api_num_threads":            "rest_threads",
}

// ShortName is a parameter's name in tables: max_batch_size is "batch".
func ShortName(name string) string {
	if s := shortNames[name]; s != "" {
		return s
	}
	return name
}

// CompactConfig renders a configuration as batch=32 timeout_us=2000 ...
func CompactConfig(ps []store.Param) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = ShortName(p.Name) + "=" + strconv.FormatInt(p.Value, 10)
	}
	return strings.Join(parts, " ")
}

// FmtDur renders a latency for tables: µs below a millisecond, two
// decimals below 100ms, "-" for zero.
func FmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return d.Round(time.Millisecond).String()
}

// Truncate shortens s to n runes on one line, marking the cut with "…".
func Truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Throughput renders a measured trial's achieved rate. A trial can carry a
// latency and a batch size but no rate: no response succeeded inside the
// measured window, or the measurement stopped before one was counted. It
// then reads "—" and why, never "0.0 req/s".
func Throughput(s store.Summary, state store.TrialState) string {
	if s.Throughput > 0 {
		return fmt.Sprintf("%.1f req/s", s.Throughput)
	}
	switch {
	case s.Requests == 0:
		return "— (no request completed)"
	case s.ErrorRate >= 1:
		return "— (every request failed)"
	case state == store.TrialEarlyStopped:
		return "— (stopped early, before a rate was measured)"
	}
	return "— (no success inside the measured window)"
}

// WriteTrialTable writes one row per trial and, when trials measured,
// the setup time per trial.
func WriteTrialTable(w io.Writer, trials []store.Trial) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	// The node column only when trials ran on named machines (parallel
	// trials on a cluster).
	nodes := slices.ContainsFunc(trials, func(tr store.Trial) bool { return tr.Node != "" })
	node := func(tr store.Trial) string {
		if !nodes {
			return ""
		}
		return cmp.Or(tr.Node, "-") + "\t"
	}
	head := "trial\trole\tstate\tconfig\treq/s\tP99\terrors\tbatch\tsetup\tnote"
	if nodes {
		head = strings.Replace(head, "\tstate", "\tnode\tstate", 1)
	}
	fmt.Fprintln(tw, head)
	for _, tr := range trials {
		qps, p99, errs, batch := "-", "-", "-", "-"
		if tr.Objective != nil {
			qps = strings.TrimSuffix(Throughput(tr.Summary, tr.State), " req/s")
			p99 = FmtDur(tr.Summary.P99)
			errs = fmt.Sprintf("%.2f%%", 100*tr.Summary.ErrorRate)
			batch = fmt.Sprintf("%.1f", tr.Summary.MeanBatch)
		}
		note := tr.Reason
		if note == "" {
			note = tr.Why
		}
		setup := "-"
		if d, ok := SetupTime(tr); ok {
			setup = d.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tr.Seq, tr.Role, node(tr), tr.State, CompactConfig(tr.Config), qps, p99, errs, batch, setup, Truncate(note, 70))
	}
	tw.Flush()
	var setups []time.Duration
	for _, tr := range trials {
		if d, ok := SetupTime(tr); ok {
			setups = append(setups, d)
		}
	}
	if len(setups) > 0 {
		slices.Sort(setups)
		var sum time.Duration
		for _, d := range setups {
			sum += d
		}
		fmt.Fprintf(w, "setup per trial (restart + ready + warmup), %d trials: mean %s, median %s, max %s\n", len(setups),
			(sum / time.Duration(len(setups))).Round(10*time.Millisecond), setups[len(setups)/2].Round(10*time.Millisecond), setups[len(setups)-1].Round(10*time.Millisecond))
	}
}

// Indent indents every line of s by two spaces.
func Indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}

// WriteText writes r as text: the facts, the trial table, the
// confirmation's intervals and the verdict.
func WriteText(w io.Writer, r *Report) error {
	f := r.Study
	fmt.Fprintf(w, "study %s, run %d (%s, %s), started %s, %s\n", f.Name, r.Run.ID, r.Run.Kind, r.Run.State,
		r.Run.Started.UTC().Format(time.DateTime+" MST"), r.Timing.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "target: %s\nload: %s\nSLO: %s ≤ %s, errors ≤ %g; objective %s\n", f.Target, f.Load, f.Quantile, f.SLOLatency, f.ErrorRate, f.Objective)
	trials := make([]store.Trial, len(r.Trials))
	for i, t := range r.Trials {
		trials[i] = t.Trial
	}
	WriteTrialTable(w, trials)
	if len(r.Candidates) > 0 {
		fmt.Fprintln(w, "\nconfirmation (fresh restarts):")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "role\tconfig\tmean\tinterval\tfeasible")
		for _, c := range r.Candidates {
			mark := ""
			if c.Winner {
				mark = " ← winner"
			}
			interval := "-"
			if c.Bounded {
				interval = fmt.Sprintf("[%s, %s]", r.fmtObjective(c.Low), r.fmtObjective(c.High))
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%d/%d\n", c.Role, mark, CompactConfig(c.Config), r.fmtObjective(c.Mean), interval, c.Feasible, c.Repeats)
		}
		tw.Flush()
	}
	writeVerdict(w, r)
	return nil
}

func writeVerdict(w io.Writer, r *Report) {
	v := r.Verdict
	if v == nil {
		fmt.Fprintf(w, "\nno recommendation: %s\n", r.NoVerdict)
		return
	}
	fmt.Fprintf(w, "\nrecommended: %s (%s)\n", CompactConfig(v.Config), r.fmtObjective(v.Objective))
	fmt.Fprintf(w, "gain over %s: %s\n", v.Baseline, GainText(&v.Recommendation))
	if v.Why != "" {
		fmt.Fprintf(w, "why: %s\n", v.Why)
	}
	fmt.Fprintf(w, "batching.config:\n%s", Indent(v.Batching))
	fmt.Fprintf(w, "server flags: %s\n", strings.Join(v.Flags, " "))
}

// GainText renders a recommendation's gain with its interval.
func GainText(r *store.Recommendation) string {
	if r.Gain == 0 && r.GainLow == 0 && r.GainHigh == 0 && r.Confidence == 0 {
		return "none stated (the baseline broke the SLO or measured nothing to compare with; see why)"
	}
	if r.GainLow == r.GainHigh {
		return fmt.Sprintf("%+.1f%% (no interval)", 100*r.Gain)
	}
	return fmt.Sprintf("%+.1f%% (%.0f%% interval %+.1f%% to %+.1f%%)", 100*r.Gain, 100*r.Confidence, 100*r.GainLow, 100*r.GainHigh)
}

// fmtObjective renders an objective value in the study's unit.
func (r *Report) fmtObjective(v float64) string {
	if r.Study.Maximize {
		return fmt.Sprintf("%.1f req/s", v)
	}
	return FmtDur(time.Duration(v * float64(time.Second)))
}
