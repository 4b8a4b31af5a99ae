package docker

import (
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"
)

// TestDeviceRequests pins the --gpus forms to the device requests the
// Docker CLI sends for them. (No GPU engine here: the requests themselves
// are what can be checked.)
func TestDeviceRequests(t *testing.T) {
	gpu := [][]string{{"gpu"}}
	tests := []struct {
		in   string
		want []container.DeviceRequest
		err  bool
	}{
		{"", nil, false}, // no GPUs
		{"all", []container.DeviceRequest{{Count: -1, Capabilities: gpu}}, false},                                   // every GPU
		{"2", []container.DeviceRequest{{Count: 2, Capabilities: gpu}}, false},                                      // a count
		{"device=0,2", []container.DeviceRequest{{DeviceIDs: []string{"0", "2"}, Capabilities: gpu}}, false},        // chosen ones
		{"device=GPU-3a1b", []container.DeviceRequest{{DeviceIDs: []string{"GPU-3a1b"}, Capabilities: gpu}}, false}, // by UUID
		{"0", nil, true},         // zero is not a request
		{"-1", nil, true},        // negative
		{"device=", nil, true},   // no device
		{"device=0,", nil, true}, // empty entry
		{"many", nil, true},      // not a form
	}
	for _, tt := range tests {
		got, err := deviceRequests(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("deviceRequests(%q): error %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("deviceRequests(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
