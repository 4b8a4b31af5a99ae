package report

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/batchtune/batchtune/store"
)

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"config":     CompactConfig,
	"dur":        FmtDur,
	"gain":       GainText,
	"pct":        func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"f1":         func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"when":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	"round":      func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) },
	"join":       strings.Join,
	"short":      ShortName,
	"throughput": func(t Trial) string { return Throughput(t.Summary, t.State) },
	"inc":        func(i int) int { return i + 1 },
}).ParseFS(templateFS, "templates/*.html"))

// page is what the report template renders.
type page struct {
	*Report
	Figures []Figure
	Trial   []Trial
	// Link is the daemon's index, or "" in a file.
	Index string
}

// HTMLOptions change what WriteHTML puts around the report.
type HTMLOptions struct {
	// Index, when set, is linked as the way back to a list of studies
	// (the daemon's /reports page).
	Index string
}

// WriteHTML writes r as one self-contained HTML page: inline CSS and SVG,
// no script, nothing fetched when it is opened.
func WriteHTML(w io.Writer, r *Report, o *HTMLOptions) error {
	p := page{Report: r, Figures: r.Figures()}
	if o != nil {
		p.Index = o.Index
	}
	return templates.ExecuteTemplate(w, "report.html", p)
}

// WriteJSON writes r with its figures' marker counts, indented.
func WriteJSON(w io.Writer, r *Report) error {
	out := struct {
		*Report
		Figures []Figure `json:"figures"`
	}{r, r.Figures()}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// IndexEntry is one study in the daemon's list of reports.
type IndexEntry struct {
	Name    string
	URL     string
	LastRun *store.Run
	// Incumbent is the study's accepted configuration, nil when none.
	Incumbent *store.Recommendation
}

// WriteIndex writes an HTML list of studies, each linked to its latest
// report.
func WriteIndex(w io.Writer, entries []IndexEntry, now time.Time) error {
	return templates.ExecuteTemplate(w, "index.html", struct {
		Entries []IndexEntry
		Now     time.Time
	}{entries, now})
}

// ObjectiveText renders an objective value in the study's unit.
func (r *Report) ObjectiveText(v float64) string { return r.fmtObjective(v) }

// Failed lists the trials that measured nothing: failed and rejected.
func (r *Report) Failed() []Trial {
	var out []Trial
	for _, t := range r.Trials {
		if t.Class == ClassFailed || t.Class == ClassRejected {
			out = append(out, t)
		}
	}
	return out
}
