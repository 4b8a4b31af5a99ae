package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/batchtune/batchtune/store"
)

// Figure is one plot of the HTML report: its SVG and how many markers of
// each kind it draws. Each marker in the SVG is a path with class
// "pt pt-KIND", so a reader (or a browser test) can count them.
type Figure struct {
	ID      string         `json:"id"`
	Title   string         `json:"title"`
	Caption string         `json:"caption,omitempty"`
	Counts  map[string]int `json:"counts"`
	Legend  []LegendItem   `json:"-"`
	SVG     template.HTML  `json:"-"`
}

// LegendItem names a marker kind and its colour; the HTML draws legends
// itself, so that the SVG holds only data markers.
type LegendItem struct {
	Kind  string
	Label string
	Color string
	Count int
}

// marker is how a kind of point is drawn. Within one figure every kind
// has its own fill colour: that is how the markers are found in the SVG.
type marker struct {
	label  string
	color  color.RGBA
	shape  draw.GlyphDrawer
	radius vg.Length
}

var markers = map[string]marker{
	ClassFeasible:   {"feasible", rgb(0x1f, 0x77, 0xb4), draw.CircleGlyph{}, 3},
	ClassInfeasible: {"infeasible (broke the SLO)", rgb(0xd6, 0x27, 0x28), draw.PyramidGlyph{}, 3.5},
	ClassRejected:   {"rejected by a hard rule (not run)", rgb(0x7f, 0x7f, 0x7f), draw.BoxGlyph{}, 3},
	ClassFailed:     {"failed (nothing measured)", rgb(0x94, 0x67, 0xbd), draw.BoxGlyph{}, 3.5},
	"winner":        {"winner", rgb(0xff, 0x7f, 0x0e), draw.CircleGlyph{}, 6},
	"confirm":       {"confirmation / baseline repeat", rgb(0x2c, 0xa0, 0x2c), draw.CircleGlyph{}, 3},
	"mean":          {"mean with interval", rgb(0x1f, 0x77, 0xb4), draw.BoxGlyph{}, 4},
	"sample":        {"one repeat", rgb(0x17, 0xbe, 0xcf), draw.CircleGlyph{}, 2},
	"step":          {"load step", rgb(0x1f, 0x77, 0xb4), draw.CircleGlyph{}, 2.5},
	"accepted":      {"accepted recommendation", rgb(0x2c, 0xa0, 0x2c), draw.CircleGlyph{}, 4},
	"kept":          {"recommendation kept out (incumbent held)", rgb(0xbc, 0xbd, 0x22), draw.PyramidGlyph{}, 4},
	"incumbent":     {"incumbent re-measured", rgb(0x8c, 0x56, 0x4b), draw.BoxGlyph{}, 3},
}

func rgb(r, g, b uint8) color.RGBA { return color.RGBA{R: r, G: g, B: b, A: 0xff} }

func hexOf(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// canvas is a figure being drawn.
type canvas struct {
	p      *plot.Plot
	counts map[string]int
	order  []string
}

func newCanvas(title, x, y string) *canvas {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return &canvas{p: p, counts: map[string]int{}}
}

// points adds a scatter of kind.
func (c *canvas) points(kind string, xys plotter.XYs) {
	if len(xys) == 0 {
		return
	}
	m := markers[kind]
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return // NaN or Inf: such points cannot be drawn
	}
	s.GlyphStyle = draw.GlyphStyle{Color: m.color, Radius: m.radius, Shape: m.shape}
	c.p.Add(s)
	if _, ok := c.counts[kind]; !ok {
		c.order = append(c.order, kind)
	}
	c.counts[kind] += len(xys)
}

// line adds a polyline (no markers).
func (c *canvas) line(xys plotter.XYs, col color.RGBA, dashed bool) {
	if len(xys) < 2 {
		return
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return
	}
	l.Color = col
	l.Width = vg.Points(1.2)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	c.p.Add(l)
}

// pathRE finds the filled paths vgsvg writes.
var pathRE = regexp.MustCompile(`<path d="[^"]*" style="fill:(#[0-9A-F]{6})"`)

// render draws the plot as inline SVG and tags each marker path with its
// kind.
func (c *canvas) render(id, caption string) Figure {
	pad(&c.p.X)
	pad(&c.p.Y)
	cv := vgsvg.New(vg.Points(560), vg.Points(300))
	c.p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return Figure{ID: id, Title: c.p.Title.Text, Caption: "plot failed: " + err.Error()}
	}
	byColor := map[string]string{}
	var legend []LegendItem
	for _, k := range c.order {
		m := markers[k]
		byColor[hexOf(m.color)] = k
		legend = append(legend, LegendItem{Kind: k, Label: m.label, Color: hexOf(m.color), Count: c.counts[k]})
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i >= 0 {
		svg = svg[i:]
	}
	svg = strings.Replace(svg, "<svg ", fmt.Sprintf(`<svg id="svg-%s" role="img" aria-label="%s" `, id, template.HTMLEscapeString(c.p.Title.Text)), 1)
	svg = pathRE.ReplaceAllStringFunc(svg, func(s string) string {
		col := pathRE.FindStringSubmatch(s)[1]
		if k, ok := byColor[col]; ok {
			return `<path class="pt pt-` + k + `"` + strings.TrimPrefix(s, "<path")
		}
		return s
	})
	return Figure{ID: id, Title: c.p.Title.Text, Caption: caption, Counts: c.counts, Legend: legend, SVG: template.HTML(svg)}
}

// pad widens an axis by 6% each side so that markers on the edge are not
// clipped, and gives a degenerate range some width.
func pad(a *plot.Axis) {
	if math.IsInf(a.Min, 0) || math.IsInf(a.Max, 0) || math.IsNaN(a.Min) || math.IsNaN(a.Max) {
		a.Min, a.Max = 0, 1
	}
	span := a.Max - a.Min
	if span <= 0 {
		span = math.Max(math.Abs(a.Max), 1)
	}
	a.Min -= 0.06 * span
	a.Max += 0.06 * span
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// objective converts an objective value to what the plots show: req/s,
// or milliseconds for a latency objective (stored in seconds).
func (r *Report) plotObjective(v float64) float64 {
	if r.Study.Maximize {
		return v
	}
	return v * 1000
}

func (r *Report) objectiveAxis() string {
	if r.Study.Maximize {
		return "throughput (req/s)"
	}
	return r.Study.Quantile + " latency (ms)"
}

// Figures draws every plot the report has data for, in page order.
func (r *Report) Figures() []Figure {
	var figs []Figure
	figs = append(figs, r.trialsFigure(), r.convergenceFigure())
	figs = append(figs, r.paramFigures()...)
	if f, ok := r.confirmationFigure(); ok {
		figs = append(figs, f)
	}
	if f, ok := r.rateFigure(); ok {
		figs = append(figs, f)
	}
	if f, ok := r.historyFigure(); ok {
		figs = append(figs, f)
	}
	return figs
}

// trialsFigure: every trial, throughput against the SLO quantile's
// latency, the SLO line, the Pareto front and the winner.
func (r *Report) trialsFigure() Figure {
	q := r.Study.Quantile
	c := newCanvas("Trials: throughput against "+q+" latency", q+" latency (ms)", "throughput (req/s)")
	byClass := map[string]plotter.XYs{}
	var unmeasured []*Trial
	maxLat := ms(r.Study.SLOLatency)
	for i := range r.Trials {
		t := &r.Trials[i]
		switch {
		case t.measured():
			byClass[t.Class] = append(byClass[t.Class], plotter.XY{X: ms(t.Latency), Y: t.Summary.Throughput})
			maxLat = math.Max(maxLat, ms(t.Latency))
		case t.Class == ClassRejected || t.Class == ClassFailed:
			unmeasured = append(unmeasured, t)
		}
	}
	// Trials that measured nothing sit on the x axis, spread out.
	for i, t := range unmeasured {
		x := maxLat * float64(i+1) / float64(len(unmeasured)+1)
		byClass[t.Class] = append(byClass[t.Class], plotter.XY{X: x, Y: 0})
	}
	var front plotter.XYs
	for _, seq := range r.Pareto {
		if t := r.trial(seq); t != nil {
			front = append(front, plotter.XY{X: ms(t.Latency), Y: t.Summary.Throughput})
		}
	}
	c.line(front, rgb(0xff, 0x7f, 0x0e), false)
	if r.Study.SLOLatency > 0 {
		top := 1.0
		for _, xys := range byClass {
			for _, p := range xys {
				top = math.Max(top, p.Y)
			}
		}
		slo := ms(r.Study.SLOLatency)
		c.line(plotter.XYs{{X: slo, Y: 0}, {X: slo, Y: top * 1.05}}, rgb(0xd6, 0x27, 0x28), true)
	}
	for _, k := range []string{ClassFeasible, ClassInfeasible, ClassRejected, ClassFailed} {
		c.points(k, byClass[k])
	}
	if t := r.trial(r.Winner); t != nil {
		c.points("winner", plotter.XYs{{X: ms(t.Latency), Y: t.Summary.Throughput}})
	}
	caption := fmt.Sprintf("Dashed red: the SLO (%s ≤ %s). Orange line: the Pareto front (%d trials no other beats on both). Trials that measured nothing (rejected, failed) lie on the x axis.",
		q, r.Study.SLOLatency, len(r.Pareto))
	return c.render("trials", caption)
}

func (r *Report) trial(seq uint64) *Trial {
	if seq == 0 {
		return nil
	}
	for i := range r.Trials {
		if r.Trials[i].Seq == seq {
			return &r.Trials[i]
		}
	}
	return nil
}

// convergenceFigure: best feasible objective so far against trial number,
// the confirmation stage marked.
func (r *Report) convergenceFigure() Figure {
	c := newCanvas("Convergence: best feasible objective so far", "trial", r.objectiveAxis())
	var best plotter.XYs
	byKind := map[string]plotter.XYs{}
	top, bottom := math.Inf(-1), math.Inf(1)
	for _, p := range r.Convergence {
		if p.Best != nil {
			best = append(best, plotter.XY{X: float64(p.Seq), Y: r.plotObjective(*p.Best)})
		}
		if p.Objective == nil {
			continue
		}
		y := r.plotObjective(*p.Objective)
		top, bottom = math.Max(top, y), math.Min(bottom, y)
		kind := ClassInfeasible
		switch {
		case p.Role == store.RoleConfirm || p.Role == store.RoleBaseline:
			kind = "confirm"
		case r.trial(p.Seq).Class == ClassFeasible:
			kind = ClassFeasible
		}
		byKind[kind] = append(byKind[kind], plotter.XY{X: float64(p.Seq), Y: y})
	}
	c.line(best, rgb(0x33, 0x33, 0x33), false)
	if r.ConfirmFrom > 0 && !math.IsInf(top, 0) {
		x := float64(r.ConfirmFrom) - 0.5
		c.line(plotter.XYs{{X: x, Y: bottom}, {X: x, Y: top}}, rgb(0x55, 0x55, 0x55), true)
	}
	for _, k := range []string{ClassFeasible, ClassInfeasible, "confirm"} {
		c.points(k, byKind[k])
	}
	caption := "Black line: the best feasible objective after each trial."
	if r.ConfirmFrom > 0 {
		caption += fmt.Sprintf(" Dashed line: search ends and confirmation begins (trial %d).", r.ConfirmFrom)
	}
	return c.render("convergence", caption)
}

// Parameters returns the tuned parameters in the study's declared order;
// when the stored spec could not be read, those the run's search trials
// carry.
func (r *Report) Parameters() []string {
	if len(r.Study.Parameters) > 0 && r.Study.SpecProblem == "" {
		return r.Study.Parameters
	}
	var names []string
	for _, t := range r.Trials {
		if t.Role != store.RoleSearch {
			continue
		}
		for _, p := range t.Config {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	if len(names) == 0 {
		return r.Study.Parameters
	}
	return names
}

// paramFigures: one panel per tuned parameter, objective against value.
// The baseline is left out: its configuration (TF's defaults, or
// production's) is not one the space holds.
func (r *Report) paramFigures() []Figure {
	var figs []Figure
	for _, name := range r.Parameters() {
		c := newCanvas(name, name, r.objectiveAxis())
		byClass := map[string]plotter.XYs{}
		for _, t := range r.Trials {
			if t.Objective == nil || !t.measured() || t.Role == store.RoleBaseline {
				continue
			}
			for _, p := range t.Config {
				if p.Name == name {
					byClass[t.Class] = append(byClass[t.Class], plotter.XY{X: float64(p.Value), Y: r.plotObjective(*t.Objective)})
				}
			}
		}
		for _, k := range []string{ClassFeasible, ClassInfeasible} {
			c.points(k, byClass[k])
		}
		figs = append(figs, c.render("param-"+name, ""))
	}
	return figs
}

// confirmationFigure: each confirmation candidate's repeats and the
// interval on their mean.
func (r *Report) confirmationFigure() (Figure, bool) {
	if len(r.Candidates) == 0 {
		return Figure{}, false
	}
	c := newCanvas("Confirmation: repeats and intervals", "candidate", r.objectiveAxis())
	var means, samples plotter.XYs
	var errs plotter.YErrors
	var names []string
	for i, cd := range r.Candidates {
		x := float64(i + 1)
		label := fmt.Sprintf("%d", i+1)
		if cd.Role == store.RoleBaseline {
			label = "baseline"
		} else if cd.Winner {
			label += " (winner)"
		}
		names = append(names, label)
		for _, s := range cd.Samples {
			samples = append(samples, plotter.XY{X: x + 0.15, Y: r.plotObjective(s)})
		}
		if len(cd.Samples) == 0 {
			continue
		}
		m := r.plotObjective(cd.Mean)
		means = append(means, plotter.XY{X: x, Y: m})
		errs = append(errs, struct{ Low, High float64 }{m - r.plotObjective(cd.Low), r.plotObjective(cd.High) - m})
	}
	if len(means) > 0 {
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{means, errs})
		if err == nil {
			eb.LineStyle.Color = rgb(0x1f, 0x77, 0xb4)
			eb.LineStyle.Width = vg.Points(1.5)
			c.p.Add(eb)
		}
	}
	c.points("sample", samples)
	c.points("mean", means)
	c.p.NominalX(append([]string{""}, names...)...)
	c.p.X.Min, c.p.X.Max = 0.5, float64(len(names))+0.5
	conf := r.Study.Confidence
	caption := fmt.Sprintf("Each candidate's mean over its fresh-restart repeats with the %.0f%% interval (Student's t); dots are single repeats. Candidates: ", 100*conf)
	for i, cd := range r.Candidates {
		if i > 0 {
			caption += "; "
		}
		caption += fmt.Sprintf("%s = %s", names[i], CompactConfig(cd.Config))
	}
	f := c.render("confirmation", caption)
	return f, true
}

// rateFigure: latency against achieved rate for trials that recorded
// several load steps.
func (r *Report) rateFigure() (Figure, bool) {
	if len(r.RateCurves) == 0 {
		return Figure{}, false
	}
	q := r.Study.Quantile
	c := newCanvas("Rate against "+q+" latency", "achieved rate (req/s)", q+" latency (ms)")
	var all plotter.XYs
	for _, rc := range r.RateCurves {
		var xys plotter.XYs
		for _, s := range rc.Steps {
			xys = append(xys, plotter.XY{X: s.Achieved, Y: ms(s.Latency)})
		}
		c.line(xys, rgb(0x99, 0x99, 0x99), false)
		all = append(all, xys...)
	}
	c.points("step", all)
	if r.Study.SLOLatency > 0 && len(all) > 0 {
		hi := 0.0
		for _, p := range all {
			hi = math.Max(hi, p.X)
		}
		c.line(plotter.XYs{{X: 0, Y: ms(r.Study.SLOLatency)}, {X: hi, Y: ms(r.Study.SLOLatency)}}, rgb(0xd6, 0x27, 0x28), true)
	}
	return c.render("rate", fmt.Sprintf("%d trials recorded several load steps; the knee is where latency leaves the floor. Dashed red: the SLO.", len(r.RateCurves))), true
}

// historyFigure: the incumbent's objective over time and each
// recommendation, for studies the daemon re-tunes.
func (r *Report) historyFigure() (Figure, bool) {
	h := r.History
	if h == nil || (len(h.Recommendations) == 0 && len(h.Remeasured) == 0) {
		return Figure{}, false
	}
	c := newCanvas("Re-tune history: the incumbent over time", "time (UTC)", r.objectiveAxis())
	c.p.X.Tick.Marker = plot.TimeTicks{Format: "01-02 15:04", Time: plot.UTCUnixTime}
	var accepted, kept, inc, step plotter.XYs
	for _, rec := range h.Recommendations {
		p := plotter.XY{X: float64(rec.Time.Unix()), Y: r.plotObjective(rec.Objective)}
		if rec.Accepted {
			if len(step) > 0 {
				step = append(step, plotter.XY{X: p.X, Y: step[len(step)-1].Y})
			}
			step = append(step, p)
			accepted = append(accepted, p)
		} else {
			kept = append(kept, p)
		}
	}
	for _, m := range h.Remeasured {
		inc = append(inc, plotter.XY{X: float64(m.At.Unix()), Y: r.plotObjective(m.Objective)})
	}
	if len(step) > 0 && len(inc) > 0 && inc[len(inc)-1].X > step[len(step)-1].X {
		step = append(step, plotter.XY{X: inc[len(inc)-1].X, Y: step[len(step)-1].Y})
	}
	c.line(step, rgb(0x2c, 0xa0, 0x2c), false)
	c.points("accepted", accepted)
	c.points("kept", kept)
	c.points("incumbent", inc)
	return c.render("history", fmt.Sprintf("%d runs, %d recommendations (%d accepted). Green steps: the incumbent's objective as accepted.", len(h.Runs), len(h.Recommendations), len(accepted))), true
}
