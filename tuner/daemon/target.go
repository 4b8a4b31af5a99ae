package daemon

import (
	"fmt"

	"github.com/batchtune/batchtune/configs"
)

// Target identifies the TF Serving a study tunes, so that two runs never
// restart the same server at once: its runtime, what it runs (binary,
// image, or the user's container tuned in place) and its host ports.
type Target struct {
	Runtime string `json:"runtime"`
	// Identity is the process runtime's binary, the docker runtime's
	// image, or "container:NAME" for a container tuned in place.
	Identity string `json:"identity"`
	GRPCPort int    `json:"grpc_port,omitempty"`
	RESTPort int    `json:"rest_port,omitempty"`
}

// TargetOf is the target of a study's target section.
func TargetOf(t configs.Target) Target {
	out := Target{Runtime: t.Runtime, GRPCPort: t.Ports.GRPC, RESTPort: t.Ports.REST}
	switch {
	case t.Runtime == configs.RuntimeProcess:
		out.Identity = t.Process.Binary
	case t.Docker.Container != "":
		out.Identity = "container:" + t.Docker.Container
	default:
		out.Identity = t.Docker.Image
	}
	return out
}

func (t Target) String() string {
	return fmt.Sprintf("%s %s ports %d/%d", t.Runtime, t.Identity, t.GRPCPort, t.RESTPort)
}

// Conflicts reports whether runs against t and u must not overlap: the
// same target, the same container tuned in place, or a fixed host port in
// common (two servers cannot both bind it; 0 means a free port per trial).
func (t Target) Conflicts(u Target) bool {
	if t == u {
		return true
	}
	if t.Runtime == configs.RuntimeDocker && u.Runtime == configs.RuntimeDocker &&
		t.Identity == u.Identity && len(t.Identity) > len("container:") && t.Identity[:len("container:")] == "container:" {
		return true
	}
	for _, p := range []int{t.GRPCPort, t.RESTPort} {
		if p != 0 && (p == u.GRPCPort || p == u.RESTPort) {
			return true
		}
	}
	return false
}
