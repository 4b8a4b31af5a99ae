package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/batchtune/batchtune/report"
	"github.com/batchtune/batchtune/store"
)

// PathReports is where the daemon serves its HTML reports, read-only:
//
//	GET /reports                        an index of the store's studies
//	GET /reports/{study}                the study's latest run's report
//	GET /reports/{study}/runs/{run}     one run's report
//
// The pages are the report package's: inline CSS and SVG, no script. They
// follow the API's rules for reads.
const PathReports = "/reports"

// reportCSP lets a report page use its inline styles and nothing else.
const reportCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// routeReports adds the report pages to mux.
func (a *api) routeReports(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathReports, a.reportIndex)
	mux.HandleFunc("GET "+PathReports+"/{$}", a.reportIndex)
	mux.HandleFunc("GET "+PathReports+"/{study}", a.studyReport)
	mux.HandleFunc("GET "+PathReports+"/{study}/runs/{run}", a.studyReport)
}

func (a *api) reportIndex(w http.ResponseWriter, r *http.Request) {
	studies, err := a.d.db.Studies(r.Context())
	if err != nil {
		htmlError(w, statusOf(err), err)
		return
	}
	entries := make([]report.IndexEntry, 0, len(studies))
	for _, s := range studies {
		e := report.IndexEntry{Name: s.Name, URL: PathReports + "/" + url.PathEscape(s.Name)}
		runs, err := a.d.db.Runs(r.Context(), s.Name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			htmlError(w, statusOf(err), err)
			return
		}
		if len(runs) > 0 {
			e.LastRun = &runs[len(runs)-1]
		}
		if inc, err := a.d.db.Incumbent(r.Context(), s.Name); err == nil {
			e.Incumbent = inc
		}
		entries = append(entries, e)
	}
	var b bytes.Buffer
	if err := report.WriteIndex(&b, entries, a.d.clock.Now()); err != nil {
		htmlError(w, http.StatusInternalServerError, err)
		return
	}
	writeHTML(w, b.Bytes())
}

func (a *api) studyReport(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("study")
	var id uint64
	if v := r.PathValue("run"); v != "" {
		n, err := runID(v, false)
		if err != nil {
			htmlError(w, http.StatusBadRequest, err)
			return
		}
		id = n
	}
	rep, err := report.Build(r.Context(), a.d.db, name, id, a.d.clock.Now())
	switch {
	case errors.Is(err, report.ErrNoRuns):
		htmlError(w, http.StatusNotFound, fmt.Errorf("study %s has no runs yet", name))
		return
	case errors.Is(err, store.ErrNotFound):
		htmlError(w, http.StatusNotFound, err)
		return
	case err != nil:
		htmlError(w, statusOf(err), err)
		return
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, rep, &report.HTMLOptions{Index: PathReports}); err != nil {
		htmlError(w, http.StatusInternalServerError, err)
		return
	}
	writeHTML(w, b.Bytes())
}

func writeHTML(w http.ResponseWriter, page []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", reportCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(page)
}

// htmlError writes err as a small page: a browser asked for one.
func htmlError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", reportCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>batchtune: %d</title></head><body><p>%s</p><p><a href=\"%s\">all studies</a></p></body></html>\n",
		code, template.HTMLEscapeString(err.Error()), PathReports)
}
