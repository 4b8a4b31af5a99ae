package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/tfserving"
)

var backoffConfig = backoff.Config{
	BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond,
}

// ReadyReason says why a model is not (yet) AVAILABLE.
type ReadyReason string

// Reasons a wait can end without an AVAILABLE model.
const (
	// ReasonUnreachable: no connection (refused, no route, DNS). TF Serving
	// opens its ports only after every model loaded, so a slow load looks
	// like this too; the detail says what the dial saw.
	ReasonUnreachable ReadyReason = "unreachable"
	// ReasonNotFound: the server answered that it has no such model or
	// version. Reported at once: a server that opened its ports has loaded
	// all the models it will serve.
	ReasonNotFound ReadyReason = "model-not-found"
	// ReasonLoading: the model was still START or LOADING at the deadline.
	ReasonLoading ReadyReason = "still-loading"
	// ReasonFailed: the model reached END with an error (load failure).
	// Reported at once.
	ReasonFailed ReadyReason = "load-failed"
	// ReasonNotServing: the server answered but not like TF Serving
	// (Unimplemented, a malformed status, UNLOADING/END without error).
	ReasonNotServing ReadyReason = "not-serving"
)

// ReadyError is WaitReady's error when the model did not become AVAILABLE.
// It wraps ErrNotReady and, for the reasons that have one, ErrUnreachable,
// ErrModelNotFound or ErrModelFailed.
type ReadyError struct {
	Target string        // what was polled: host:port and model
	Reason ReadyReason   // the last thing seen
	Detail string        // the server's or the dialer's words
	Waited time.Duration // from the call to the verdict
}

func (e *ReadyError) Error() string {
	return fmt.Sprintf("probe: %s not ready after %s: %s: %s", e.Target, e.Waited.Round(time.Millisecond), e.Reason, e.Detail)
}

// Unwrap returns ErrNotReady and the reason's sentinel.
func (e *ReadyError) Unwrap() []error {
	errs := []error{ErrNotReady}
	switch e.Reason {
	case ReasonUnreachable:
		errs = append(errs, ErrUnreachable)
	case ReasonNotFound:
		errs = append(errs, ErrModelNotFound)
	case ReasonFailed:
		errs = append(errs, ErrModelFailed)
	}
	return errs
}

// ReadyOptions tunes WaitReady. The zero value (or nil) polls over gRPC.
type ReadyOptions struct {
	// REST polls GET /v1/models/NAME on t.RESTAddr instead of gRPC
	// GetModelStatus on t.Addr.
	REST bool
	// Interval between polls; 50 ms when 0.
	Interval time.Duration
	// Logger receives one debug line per poll; discarded when nil.
	Logger *slog.Logger
}

// verdict is one poll's outcome.
type verdict struct {
	ready  bool
	final  bool // no point polling again
	weak   bool // a timed-out poll: keeps an earlier, more telling reason
	reason ReadyReason
	detail string
}

// WaitReady polls the target until its model (the pinned version, or any
// version when t.Version is 0) is AVAILABLE, and returns nil then. It gives
// up after timeout with a *ReadyError naming the last reason seen; a model
// that is not found or that failed to load is reported at once. When ctx
// ends first it returns promptly (within one poll's network round trip)
// with an error wrapping context.Cause(ctx), so a caller that cancels the
// context because the server process died is not kept waiting.
func WaitReady(ctx context.Context, t Target, timeout time.Duration, o *ReadyOptions) error {
	if o == nil {
		o = &ReadyOptions{}
	}
	if t.Model == "" {
		return fmt.Errorf("%w: model is empty", ErrBadOptions)
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: ready timeout must be > 0, got %s", ErrBadOptions, timeout)
	}
	interval := o.Interval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var poll func(context.Context) verdict
	name := t.Addr
	if o.REST {
		if err := checkHostPort("rest_addr", t.RESTAddr); err != nil {
			return err
		}
		name = t.RESTAddr
		client := &http.Client{}
		poll = func(ctx context.Context) verdict { return pollREST(ctx, client, t) }
	} else {
		conn, err := dialControl(t.Addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.Connect()
		poll = func(ctx context.Context) verdict { return pollGRPC(ctx, conn, t) }
	}
	name += " model " + t.Model
	if t.Version > 0 {
		name += " version " + strconv.FormatInt(t.Version, 10)
	}

	start := time.Now()
	deadline := start.Add(timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	last := verdict{reason: ReasonUnreachable, detail: "no answer yet"}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe: waiting for %s: %w", name, context.Cause(ctx))
		case <-dctx.Done():
			return &ReadyError{Target: name, Reason: last.reason, Detail: last.detail, Waited: time.Since(start)}
		case <-timer.C:
		}
		// One poll may take at most 2 s so that a hung server cannot eat
		// the whole timeout in one attempt.
		pctx, pcancel := context.WithTimeout(dctx, 2*time.Second)
		v := poll(pctx)
		pcancel()
		if ctx.Err() != nil {
			return fmt.Errorf("probe: waiting for %s: %w", name, context.Cause(ctx))
		}
		log.Debug("probe: readiness poll", "target", name, "ready", v.ready, "reason", v.reason, "detail", v.detail)
		if v.ready {
			return nil
		}
		if !v.weak || last.detail == "no answer yet" {
			last = v
		}
		if v.final {
			return &ReadyError{Target: name, Reason: v.reason, Detail: v.detail, Waited: time.Since(start)}
		}
		timer.Reset(interval)
	}
}

func pollGRPC(ctx context.Context, conn grpc.ClientConnInterface, t Target) verdict {
	resp, err := tfserving.NewModelServiceClient(conn).GetModelStatus(ctx,
		&tfserving.GetModelStatusRequest{ModelSpec: &tfserving.ModelSpec{Name: t.Model, VersionChoice: t.modelSpec().GetVersionChoice()}},
		grpc.WaitForReady(false))
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.NotFound:
			return verdict{final: true, reason: ReasonNotFound, detail: st.Message()}
		case codes.Unimplemented:
			return verdict{final: true, reason: ReasonNotServing, detail: "ModelService/GetModelStatus is unimplemented: " + st.Message()}
		case codes.DeadlineExceeded, codes.Canceled:
			// The poll timed out (a slow connect or a hung server): keep the
			// previous reason, which says more.
			return verdict{weak: true, reason: ReasonUnreachable, detail: "no answer within the poll timeout (connecting, or the server hangs)"}
		}
		return verdict{reason: ReasonUnreachable, detail: st.Code().String() + ": " + st.Message()}
	}
	return judge(resp.GetModelVersionStatus(), t)
}

// judge decides from a status list. A model is ready when the pinned
// version (or, unpinned, any version) is AVAILABLE.
func judge(vs []*tfserving.ModelVersionStatus, t Target) verdict {
	if len(vs) == 0 {
		return verdict{reason: ReasonNotServing, detail: "status lists no versions"}
	}
	var states []string
	var failed *tfserving.ModelVersionStatus
	for _, v := range vs {
		if t.Version > 0 && v.GetVersion() != t.Version {
			continue
		}
		if v.GetState() == tfserving.ModelVersionStatus_AVAILABLE {
			return verdict{ready: true}
		}
		states = append(states, fmt.Sprintf("version %d %s", v.GetVersion(), v.GetState()))
		if v.GetState() == tfserving.ModelVersionStatus_END && v.GetStatus().GetErrorCode() != 0 {
			failed = v
		}
	}
	if len(states) == 0 {
		return verdict{final: true, reason: ReasonNotFound, detail: fmt.Sprintf("version %d not in the status list", t.Version)}
	}
	detail := strings.Join(states, ", ")
	if failed != nil {
		return verdict{final: true, reason: ReasonFailed,
			detail: fmt.Sprintf("version %d: error %d: %s", failed.GetVersion(), failed.GetStatus().GetErrorCode(), failed.GetStatus().GetErrorMessage())}
	}
	return verdict{reason: ReasonLoading, detail: detail}
}

// restStatus is GET /v1/models/NAME's answer. Versions are strings and
// error codes are names in TF's REST API.
type restStatus struct {
	ModelVersionStatus []struct {
		Version string `json:"version"`
		State   string `json:"state"`
		Status  struct {
			ErrorCode    string `json:"error_code"`
			ErrorMessage string `json:"error_message"`
		} `json:"status"`
	} `json:"model_version_status"`
	Error string `json:"error"`
}

func pollREST(ctx context.Context, client *http.Client, t Target) verdict {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+t.RESTAddr+t.restModelPath(), nil)
	if err != nil {
		return verdict{final: true, reason: ReasonNotServing, detail: err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return verdict{weak: true, reason: ReasonUnreachable, detail: "no answer within the poll timeout (connecting, or the server hangs)"}
		}
		return verdict{reason: ReasonUnreachable, detail: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var st restStatus
	jerr := json.Unmarshal(body, &st)
	if resp.StatusCode == http.StatusNotFound {
		return verdict{final: true, reason: ReasonNotFound, detail: firstNonEmpty(st.Error, strings.TrimSpace(string(body)), resp.Status)}
	}
	if resp.StatusCode != http.StatusOK || jerr != nil {
		return verdict{reason: ReasonNotServing, detail: fmt.Sprintf("GET %s: %s: %s", req.URL.Path, resp.Status, truncate(string(body), 200))}
	}
	var vs []*tfserving.ModelVersionStatus
	for _, v := range st.ModelVersionStatus {
		ver, _ := strconv.ParseInt(v.Version, 10, 64)
		state := tfserving.ModelVersionStatus_State(tfserving.ModelVersionStatus_State_value[v.State])
		code := int32(0)
		if v.Status.ErrorCode != "" && v.Status.ErrorCode != "OK" {
			code = 2 // UNKNOWN: the name is kept in the message
		}
		vs = append(vs, &tfserving.ModelVersionStatus{Version: ver, State: state,
			Status: &tfserving.StatusProto{ErrorCode: code, ErrorMessage: strings.TrimSpace(v.Status.ErrorCode + " " + v.Status.ErrorMessage)}})
	}
	return judge(vs, t)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
