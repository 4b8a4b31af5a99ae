package main

import (
	"strings"
	"testing"
)

// TestProbeFlagBounds: 0 and absurd values are errors naming the flag,
// never clamped (issue 15: --connections 0, --max-workers 0, --batch 0
// were silently raised; --concurrency 2000000000 ran out of memory).
func TestProbeFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--connections", "0"}, "--connections must be from 1 to 1024, got 0"},
		{[]string{"--max-workers", "0", "--rate", "10"}, "--max-workers must be from 1 to 10000, got 0"},
		{[]string{"--batch", "0"}, "--batch must be from 1 to 1048576, got 0"},
		{[]string{"--concurrency", "2000000000"}, "--concurrency must be from 1 to 10000, got 2000000000"},
		{[]string{"--rate", "1e9"}, "--rate must be <= 1000000"},
	} {
		_, _, err := runProbeCmd(t, append([]string{"--target", "127.0.0.1:1", "--model", "m"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("probe %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
