package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/batchtune/batchtune/store"
)

// API paths.
const (
	PathHealth  = "/healthz"
	PathReady   = "/readyz"
	PathMetrics = "/metrics"
	PathAPI     = "/api/v1"
)

// DefaultMaxBody bounds request bodies when APIOptions.MaxBody is 0.
const DefaultMaxBody = 4 << 10

// MinTokenLength is the shortest bearer token accepted.
const MinTokenLength = 16

// maxBudget bounds a triggered run's trial budget.
const maxBudget = 10000

// APIOptions configure the HTTP API.
type APIOptions struct {
	// Token, when set, must be presented as "Authorization: Bearer TOKEN"
	// on every mutating request (POST, DELETE), and on reads when
	// ReadToken is set. CheckListen says when a token is required.
	Token string
	// ReadToken makes every read but /healthz and /readyz need the token
	// too (ResolveReadToken decides it: by default, off loopback).
	ReadToken bool
	// MaxBody bounds request bodies; 0 means DefaultMaxBody.
	MaxBody int64
	// Listen is the listener's address (host:port); "" means loopback.
	// It decides which Host headers are this daemon's (see guard).
	Listen string
	// AllowedHosts are further host names clients may use off loopback.
	AllowedHosts []string
}

// Handler serves the daemon's JSON API, /healthz, /readyz and /metrics:
//
//	GET    /healthz                                    200 while the process serves
//	GET    /readyz                                     200 while it schedules; 503 starting or stopping
//	GET    /metrics                                    Prometheus metrics
//	GET    /api/v1/studies                             every study's status, and files that did not load
//	GET    /api/v1/studies/{study}                     one study's status
//	GET    /api/v1/studies/{study}/runs[?limit=N]      its runs, oldest first (the last N)
//	GET    /api/v1/studies/{study}/runs/{run}          one run and its trials
//	GET    /api/v1/studies/{study}/recommendation      the incumbent (404 when none)
//	GET    /api/v1/studies/{study}/recommendations     the recommendation history, oldest first
//	POST   /api/v1/studies/{study}/runs                queue a run now: {"budget": N, "warm_start": bool}
//	POST   /api/v1/studies/{study}/runs/{run}/cancel   cancel run N, or "current" (running, else queued)
//	DELETE /api/v1/studies/{study}/runs/{run}          the same
//	POST   /api/v1/reload                              re-read the studies directory
//
// Errors are {"error": "..."} with a status that says what kind.
func (d *Daemon) Handler(o APIOptions) http.Handler {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	a := &api{d: d, o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathHealth, a.health)
	mux.HandleFunc("GET "+PathReady, a.ready)
	mux.Handle("GET "+PathMetrics, d.m.handler())
	mux.HandleFunc("GET "+PathAPI+"/studies", a.studies)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}", a.study)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/runs", a.runs)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/runs/{run}", a.run)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/recommendation", a.incumbent)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/recommendations", a.recommendations)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/verifications", a.verifications)
	mux.HandleFunc("GET "+PathAPI+"/studies/{study}/plan", a.plan)
	mux.HandleFunc("POST "+PathAPI+"/studies/{study}/runs", a.mutating(a.trigger))
	mux.HandleFunc("POST "+PathAPI+"/studies/{study}/runs/{run}/cancel", a.mutating(a.cancel))
	mux.HandleFunc("DELETE "+PathAPI+"/studies/{study}/runs/{run}", a.mutating(a.cancel))
	mux.HandleFunc("POST "+PathAPI+"/reload", a.mutating(a.reload))
	a.routeReports(mux) // HTML reports, reports.go
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The patterns name their methods; say which ones a known path
		// takes rather than that it does not exist.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	var h http.Handler = mux
	if o.ReadToken {
		h = a.readGate(mux)
	}
	return newGuard(h, o.Listen, o.AllowedHosts)
}

type api struct {
	d *Daemon
	o APIOptions
}

// mutating wraps a handler that changes something: the bearer token when
// one is configured, and a bounded body.
func (a *api) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r) {
			unauthorized(w, "this endpoint needs the API's bearer token (Authorization: Bearer TOKEN)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.o.MaxBody)
		h(w, r)
	}
}

func (a *api) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	ok, why := a.d.Ready()
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
		if terseReady(r.Context()) {
			// The reason may name the store's path; reads need the token.
			why = "not ready (the reason needs the API's token)"
		}
	}
	writeJSON(w, code, map[string]any{"ready": ok, "status": why})
}

func (a *api) studies(w http.ResponseWriter, r *http.Request) {
	s, err := a.d.Studies(r.Context())
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *api) study(w http.ResponseWriter, r *http.Request) {
	s, err := a.d.Study(r.Context(), r.PathValue("study"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// storeStudy checks that name is a loaded study or one the store knows,
// and writes a 404 when it is neither.
func (a *api) storeStudy(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("study")
	if a.d.known(name) {
		return name, true
	}
	if _, err := a.d.db.Study(r.Context(), name); err != nil {
		writeError(w, statusOf(err), fmt.Errorf("%w: %s", ErrUnknownStudy, name))
		return "", false
	}
	return name, true
}

func (a *api) runs(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit: must be a whole number from 1 to 1000, got %q", v))
			return
		}
		limit = n
	}
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	runs, err := a.d.db.Runs(r.Context(), name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, statusOf(err), err)
		return
	}
	if runs == nil {
		runs = []store.Run{}
	}
	if limit > 0 && len(runs) > limit {
		runs = runs[len(runs)-limit:]
	}
	writeJSON(w, http.StatusOK, runs)
}

// runID parses the {run} path value: a run number, or, when current is
// allowed, "current" (0).
func runID(v string, current bool) (uint64, error) {
	if current && v == "current" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		want := "a run number (1, 2, ...)"
		if current {
			want += ` or "current"`
		}
		return 0, fmt.Errorf("run: must be %s, got %q", want, v)
	}
	return n, nil
}

func (a *api) run(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r.PathValue("run"), false)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	run, err := a.d.db.Run(r.Context(), name, id)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	trials, err := a.d.db.Trials(r.Context(), name, id)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if trials == nil {
		trials = []store.Trial{}
	}
	writeJSON(w, http.StatusOK, RunDetail{Run: *run, Trials: trials})
}

func (a *api) incumbent(w http.ResponseWriter, r *http.Request) {
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	inc, err := a.d.db.Incumbent(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Errorf("study %s has no accepted recommendation yet", name))
		return
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, inc)
}

func (a *api) recommendations(w http.ResponseWriter, r *http.Request) {
	name, ok := a.storeStudy(w, r)
	if !ok {
		return
	}
	recs, err := a.d.db.Recommendations(r.Context(), name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, statusOf(err), err)
		return
	}
	if recs == nil {
		recs = []store.Recommendation{}
	}
	writeJSON(w, http.StatusOK, recs)
}

func (a *api) trigger(w http.ResponseWriter, r *http.Request) {
	var t TriggerOptions
	if !decodeBody(w, r, &t) {
		return
	}
	if t.Budget < 0 || t.Budget > maxBudget {
		writeError(w, http.StatusBadRequest, fmt.Errorf("budget: must be from 1 to %d (or left out for the study's own), got %d", maxBudget, t.Budget))
		return
	}
	q, err := a.d.Trigger(r.PathValue("study"), t)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusAccepted, q)
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r.PathValue("run"), true)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	res, err := a.d.Cancel(r.Context(), r.PathValue("study"), id)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	res, err := a.d.Reload(r.Context())
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// decodeBody reads an optional JSON object into v: an empty body leaves v
// as it is; anything else must be application/json, one object, no
// unknown fields, within the size limit. It writes the error response and
// returns false when the body is refused.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
		return false
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("request body must be application/json, got %q", ct))
			return false
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %s", jsonProblem(err)))
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, errors.New("request body: more than one JSON value"))
		return false
	}
	return true
}

// jsonProblem names the field of a JSON decoding error where it can.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: must be a %s, got a JSON %s", te.Field, te.Type, te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + f
	}
	return err.Error()
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknownStudy), errors.Is(err, ErrRunNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrAlreadyQueued), errors.Is(err, ErrNothingToCancel):
		return http.StatusConflict
	case errors.Is(err, ErrDraining):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, ErrorBody{Error: err.Error()})
}

// CheckListen refuses to serve the mutating endpoints beyond loopback
// without a bearer token: addr (host:port) must name a loopback address
// (127.0.0.0/8, ::1, localhost) unless token is set.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("daemon: listen address %q: %w", addr, err)
	}
	if token != "" || IsLoopback(host) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("%w: %s (%s) is reachable from other machines", ErrTokenRequired, addr, host)
}

// IsLoopback reports whether host (a name or an IP address, without a
// port) is this machine's loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseToken checks a bearer token read from source (a file's content or
// an environment variable's value): white space around it is dropped; it
// must be one line of at least MinTokenLength printable ASCII characters.
func ParseToken(raw, source string) (string, error) {
	tok := strings.TrimSpace(raw)
	switch {
	case tok == "":
		return "", fmt.Errorf("%w: %s is empty", ErrBadToken, source)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("%w: %s holds more than one line", ErrBadToken, source)
	case len(tok) < MinTokenLength:
		return "", fmt.Errorf("%w: %s is %d characters; use at least %d (e.g. openssl rand -hex 32)", ErrBadToken, source, len(tok), MinTokenLength)
	}
	for _, c := range tok {
		if c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: %s holds a character that is not printable ASCII", ErrBadToken, source)
		}
	}
	return tok, nil
}
