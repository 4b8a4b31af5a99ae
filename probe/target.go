package probe

import (
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/tfserving"
)

// DefaultSignature is the signature TF Serving uses when a request names none.
const DefaultSignature = "serving_default"

// DefaultMetricsPath is where TF Serving serves Prometheus text on its REST
// port when the monitoring config enables it.
const DefaultMetricsPath = "/monitoring/prometheus/metrics"

// Target names one model on one TF Serving.
type Target struct {
	// Addr is the gRPC address, host:port (TF Serving's --port, 8500).
	Addr string `json:"addr"`
	// RESTAddr is the REST address, host:port (--rest_api_port, 8501). It is
	// needed for the REST transport, REST readiness and metric scraping;
	// empty means none of those.
	RESTAddr string `json:"rest_addr,omitempty"`
	// Model is the model name (--model_name).
	Model string `json:"model"`
	// Version pins a model version; 0 means the server's latest.
	Version int64 `json:"version,omitempty"`
	// Signature names the signature; empty means serving_default.
	Signature string `json:"signature,omitempty"`
}

func (t Target) signature() string {
	if t.Signature == "" {
		return DefaultSignature
	}
	return t.Signature
}

func (t Target) modelSpec() *tfserving.ModelSpec {
	s := &tfserving.ModelSpec{Name: t.Model, SignatureName: t.Signature}
	if t.Version > 0 {
		s.VersionChoice = &tfserving.ModelSpec_Version{Version: wrapperspb.Int64(t.Version)}
	}
	return s
}

// restModelPath is /v1/models/NAME or /v1/models/NAME/versions/V.
func (t Target) restModelPath() string {
	p := "/v1/models/" + t.Model
	if t.Version > 0 {
		p += "/versions/" + strconv.FormatInt(t.Version, 10)
	}
	return p
}

func checkHostPort(field, addr string) error {
	if addr == "" {
		return fmt.Errorf("%w: %s is empty (want host:port)", ErrBadOptions, field)
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%w: %s %q is not host:port", ErrBadOptions, field, addr)
	}
	return nil
}
