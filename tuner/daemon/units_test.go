package daemon_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/tuner/daemon"
)

func TestTargetConflicts(t *testing.T) {
	proc := func(bin string, g, r int) daemon.Target {
		return daemon.Target{Runtime: configs.RuntimeProcess, Identity: bin, GRPCPort: g, RESTPort: r}
	}
	dock := func(id string, g, r int) daemon.Target {
		return daemon.Target{Runtime: configs.RuntimeDocker, Identity: id, GRPCPort: g, RESTPort: r}
	}
	tests := []struct {
		name string
		a, b daemon.Target
		want bool
	}{
		// The same binary on the same (free) ports is one target.
		{"same process target", proc("/bin/tfs", 0, 0), proc("/bin/tfs", 0, 0), true},
		// Other binaries on free ports can run side by side.
		{"different binaries, free ports", proc("/bin/a", 0, 0), proc("/bin/b", 0, 0), false},
		// A fixed port in common: two servers cannot both bind it.
		{"shared gRPC port", proc("/bin/a", 8500, 8501), dock("img", 8500, 9501), true},
		{"one's gRPC is the other's REST", proc("/bin/a", 8500, 8501), proc("/bin/b", 9500, 8500), true},
		// One user container tuned in place by two studies.
		{"same container", dock("container:tfs", 8500, 8501), dock("container:tfs", 9500, 9501), true},
		// Two images on their own ports.
		{"different images and ports", dock("img:a", 8500, 8501), dock("img:b", 9500, 9501), false},
		// The same image on different fixed ports: two containers.
		{"same image, other ports", dock("img:a", 8500, 8501), dock("img:a", 9500, 9501), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Conflicts(tc.b); got != tc.want {
				t.Errorf("%v conflicts with %v: got %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Conflicts(tc.a); got != tc.want {
				t.Errorf("the other way round: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTargetOf(t *testing.T) {
	s := configs.DefaultStudy()
	s.Target.Runtime = configs.RuntimeProcess
	s.Target.Process.Binary = "/opt/tfs"
	s.Target.Ports = configs.Ports{GRPC: 8500, REST: 8501}
	if diff := cmp.Diff(daemon.Target{Runtime: "process", Identity: "/opt/tfs", GRPCPort: 8500, RESTPort: 8501}, daemon.TargetOf(s.Target)); diff != "" {
		t.Errorf("process (-want +got):\n%s", diff)
	}
	s.Target.Runtime = configs.RuntimeDocker
	s.Target.Docker.Container = "prod-tfs"
	if got := daemon.TargetOf(s.Target).Identity; got != "container:prod-tfs" {
		t.Errorf("docker container: identity %q, want container:prod-tfs", got)
	}
	s.Target.Docker.Container, s.Target.Docker.Image = "", "tensorflow/serving:2.15.0"
	if got := daemon.TargetOf(s.Target).Identity; got != "tensorflow/serving:2.15.0" {
		t.Errorf("docker image: identity %q", got)
	}
}

func TestRejectedRules(t *testing.T) {
	tests := []struct {
		name, reason string
		want         []string
	}{
		// As search renders one violation.
		{"slo rule", "search: configuration rejected: slo_timeout: batch_timeout_micros: 20000 µs is not below SLO/3 = 16.666ms (SLO 50ms)", []string{"slo_timeout"}},
		// Several violations, one rule twice: each rule counted once.
		{"several", "search: configuration rejected: tf_validity: allowed_batch_sizes: last must equal max_batch_size; slo_timeout: batch_timeout_micros: x; tf_validity: max_batch_size: y", []string{"tf_validity", "slo_timeout"}},
		// Without the error prefix (a Violation's own String).
		{"bare", "user_bound: max_batch_size: 512 is above the bound max 256", []string{"user_bound"}},
		// Unknown rule names stay out of the label set.
		{"unknown rule", "search: configuration rejected: gpu_melted: x: y", []string{"other"}},
		{"no rule at all", "refused", []string{"other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, daemon.RejectedRules(tc.reason)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		name, addr, token string
		want              error // nil, ErrTokenRequired, or any error (errAny)
	}{
		// Loopback needs no token.
		{"ipv4 loopback", "127.0.0.1:8790", "", nil},
		{"other 127/8 address", "127.0.0.2:8790", "", nil},
		{"ipv6 loopback", "[::1]:8790", "", nil},
		{"localhost", "localhost:0", "", nil},
		// Anything reachable from elsewhere needs one.
		{"all interfaces", ":8790", "", daemon.ErrTokenRequired},
		{"0.0.0.0", "0.0.0.0:8790", "", daemon.ErrTokenRequired},
		{"a LAN address", "10.1.2.3:8790", "", daemon.ErrTokenRequired},
		{"a host name", "tuner.internal:8790", "", daemon.ErrTokenRequired},
		// With a token anything goes.
		{"all interfaces with a token", ":8790", "0123456789abcdef", nil},
		// Not an address at all.
		{"no port", "127.0.0.1", "", errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := daemon.CheckListen(tc.addr, tc.token)
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want == errAny && err == nil:
				t.Error("got no error, want one")
			case tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestParseToken(t *testing.T) {
	tests := []struct {
		name, raw, want string
		bad             bool
	}{
		// A file's content with its trailing newline.
		{"file with newline", "0123456789abcdef0123\n", "0123456789abcdef0123", false},
		{"empty", "  \n", "", true},
		{"too short", "abc123", "", true},
		{"two lines", "0123456789abcdef\n0123456789abcdef\n", "", true},
		{"inner space", "0123456789 abcdef0", "", true},
		{"non-ascii", "0123456789abcdefé", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := daemon.ParseToken(tc.raw, "token.txt")
			if tc.bad {
				if !errors.Is(err, daemon.ErrBadToken) {
					t.Errorf("got %q, %v; want ErrBadToken", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
