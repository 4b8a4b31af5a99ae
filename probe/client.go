package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/tfserving"
)

// DefaultMaxMessageSize is the gRPC message size limit probe sets in both
// directions (gRPC's own 4 MiB default receive limit is too small for
// image payloads and their outputs).
const DefaultMaxMessageSize = 512 << 20

// DefaultConnections is the number of gRPC connections when unset.
const DefaultConnections = 4

// Options configures a Client. The zero value (or nil) means: gRPC over
// DefaultConnections connections, a payload built from the model's own
// signature (GetModelMetadata) with batch size 1 and seed 0, metrics
// scraped from DefaultMetricsPath on the REST address when there is one.
type Options struct {
	// Connections is the number of gRPC connections; workers share them
	// round robin. DefaultConnections when 0. (REST keeps one keep-alive
	// connection per concurrent request instead.)
	Connections int
	// Transport is GRPC (default), GRPCLib or REST.
	Transport Transport
	// Requests is the payload, sent round robin. Each is sent as given,
	// except that its model_spec is set to the Target's model, version and,
	// when the Target names one, signature.
	Requests []*tfserving.PredictRequest
	// Inputs describes the payload to generate when Requests is empty.
	// When both are empty, the inputs are discovered from the model's
	// signature.
	Inputs []InputSpec
	// BatchSize is the rows per generated request; 1 when 0.
	BatchSize int
	// Seed seeds generated values.
	Seed uint64
	// MaxMessageSize is the gRPC message limit; DefaultMaxMessageSize when 0.
	MaxMessageSize int
	// RequestTimeout is each request's deadline; a request that passes it
	// counts as a DeadlineExceeded error. 0 sets none (cheaper: no timer
	// per request); the drain still bounds a run.
	RequestTimeout time.Duration
	// MetricsURL is the full metrics URL. When empty and the Target has a
	// REST address, http://RESTAddr + MetricsPath is used.
	MetricsURL string
	// MetricsPath is the metrics path on the REST port; DefaultMetricsPath
	// when empty.
	MetricsPath string
	// NoMetrics turns scraping off.
	NoMetrics bool
	// Logger receives debug lines at run boundaries; discarded when nil.
	Logger *slog.Logger
}

// Client measures one model on one running server. It is bound to that
// server's lifetime: after a restart, make a new Client (reusing Requests
// to skip discovery). Its methods may not be called concurrently.
type Client struct {
	t          Target
	o          Options
	log        *slog.Logger
	reqs       []*tfserving.PredictRequest
	snd        sender
	ctrl       *grpc.ClientConn // typed calls (the check request) for the gRPC transports
	metricsURL string
	http       *http.Client
}

// New prepares a Client: it validates the options, builds the payload
// (discovering the inputs from the server when nothing else is given, which
// needs the model to be AVAILABLE), encodes every request once, and opens
// the connections. ctx bounds discovery only.
func New(ctx context.Context, t Target, o *Options) (*Client, error) {
	c := &Client{t: t, http: defaultHTTPClient()}
	if o != nil {
		c.o = *o
	}
	if c.o.Connections == 0 {
		c.o.Connections = DefaultConnections
	}
	if c.o.Transport == "" {
		c.o.Transport = GRPC
	}
	if c.o.BatchSize == 0 {
		c.o.BatchSize = 1
	}
	if c.o.MaxMessageSize == 0 {
		c.o.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.o.MetricsPath == "" {
		c.o.MetricsPath = DefaultMetricsPath
	}
	c.log = c.o.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	var problems []string
	if t.Model == "" {
		problems = append(problems, "model is empty")
	}
	if c.o.Connections < 1 {
		problems = append(problems, fmt.Sprintf("connections must be >= 1, got %d", c.o.Connections))
	}
	if c.o.RequestTimeout < 0 {
		problems = append(problems, fmt.Sprintf("request timeout must be >= 0, got %s", c.o.RequestTimeout))
	}
	if c.o.BatchSize < 1 {
		problems = append(problems, fmt.Sprintf("batch size must be >= 1, got %d", c.o.BatchSize))
	}
	switch c.o.Transport {
	case GRPC, GRPCLib:
		if err := checkHostPort("addr", t.Addr); err != nil {
			problems = append(problems, strings.TrimPrefix(err.Error(), ErrBadOptions.Error()+": "))
		}
	case REST:
		if err := checkHostPort("rest_addr", t.RESTAddr); err != nil {
			problems = append(problems, strings.TrimPrefix(err.Error(), ErrBadOptions.Error()+": "))
		}
	default:
		problems = append(problems, fmt.Sprintf("transport %q is not grpc, grpc-lib or rest", c.o.Transport))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadOptions, strings.Join(problems, "; "))
	}
	if !c.o.NoMetrics {
		switch {
		case c.o.MetricsURL != "":
			c.metricsURL = c.o.MetricsURL
		case t.RESTAddr != "":
			c.metricsURL = "http://" + t.RESTAddr + c.o.MetricsPath
		}
	}

	reqs := c.o.Requests
	if len(reqs) == 0 {
		inputs := c.o.Inputs
		if len(inputs) == 0 {
			var err error
			if inputs, err = DiscoverInputs(ctx, t); err != nil {
				return nil, fmt.Errorf("probe: no payload given and discovery failed: %w", err)
			}
			c.log.Debug("probe: discovered inputs", "model", t.Model, "inputs", inputs)
		}
		req, err := GenerateRequest(inputs, c.o.BatchSize, c.o.Seed)
		if err != nil {
			return nil, err
		}
		reqs = []*tfserving.PredictRequest{req}
	}
	for _, r := range reqs {
		r = proto.Clone(r).(*tfserving.PredictRequest)
		spec := r.GetModelSpec()
		if spec == nil {
			spec = &tfserving.ModelSpec{}
			r.ModelSpec = spec
		}
		spec.Name = t.Model
		if t.Version > 0 {
			spec.VersionChoice = &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(t.Version)}
		}
		if t.Signature != "" {
			spec.SignatureName = t.Signature
		}
		c.reqs = append(c.reqs, r)
	}

	switch c.o.Transport {
	case GRPC:
		h, err := newH2Sender(t.Addr, c.o.Connections, c.reqs)
		if err != nil {
			return nil, err
		}
		c.snd = h
	case GRPCLib:
		g, err := newGRPCSender(t.Addr, c.o.Connections, c.o.MaxMessageSize, c.reqs)
		if err != nil {
			return nil, err
		}
		c.snd = g
	case REST:
		r, err := newRESTSender(t, 1024, c.reqs)
		if err != nil {
			return nil, err
		}
		c.snd = r
	}
	if c.o.Transport != REST {
		ctrl, err := dialControl(t.Addr)
		if err != nil {
			c.snd.close()
			return nil, err
		}
		c.ctrl = ctrl
	}
	return c, nil
}

// Requests returns the payload the Client sends (with model_spec set), to
// reuse for a Client on a restarted server.
func (c *Client) Requests() []*tfserving.PredictRequest { return c.reqs }

// Close closes the connections.
func (c *Client) Close() error {
	err := c.snd.close()
	if c.ctrl != nil {
		err = errors.Join(err, c.ctrl.Close())
	}
	return err
}

// Check sends the first request once, decoding the answer, and returns an
// error wrapping ErrRequestsFail with the server's message when it is
// refused (wrong input name, dtype or shape, batch over max_batch_size...).
func (c *Client) Check(ctx context.Context) error {
	if c.ctrl != nil {
		resp, err := tfserving.NewPredictionServiceClient(c.ctrl).Predict(ctx, c.reqs[0])
		if err != nil {
			st := status.Convert(err)
			return fmt.Errorf("%w: Predict %s: %s: %s", ErrRequestsFail, c.t.Model, st.Code(), st.Message())
		}
		if len(resp.GetOutputs()) == 0 {
			return fmt.Errorf("%w: Predict %s: the answer has no outputs", ErrRequestsFail, c.t.Model)
		}
		return nil
	}
	rs := c.snd.(*restSender)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rs.url, bytes.NewReader(rs.bodies[0]))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rs.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: POST %s: %w", ErrRequestsFail, rs.url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		Predictions json.RawMessage `json:"predictions"`
		Outputs     json.RawMessage `json:"outputs"`
		Error       string          `json:"error"`
	}
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: POST %s: %s: %s", ErrRequestsFail, rs.url, resp.Status, firstNonEmpty(out.Error, truncate(string(body), 300)))
	}
	if len(out.Predictions) == 0 && len(out.Outputs) == 0 {
		return fmt.Errorf("%w: POST %s: the answer has neither predictions nor outputs: %s", ErrRequestsFail, rs.url, truncate(string(body), 300))
	}
	return nil
}
