package deploy_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMECurlSendsJSON: every POST or DELETE the README shows carries
// the JSON content type the API requires of a state-changing request, so
// the examples work as pasted.
func TestREADMECurlSendsJSON(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// A command may continue on the next lines (a trailing backslash).
	var cmds []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && !strings.HasPrefix(trimmed, "curl ") && !strings.HasPrefix(trimmed, "$ curl ") {
			continue
		}
		cur += " " + strings.TrimSuffix(trimmed, "\\")
		if !strings.HasSuffix(trimmed, "\\") {
			cmds = append(cmds, cur)
			cur = ""
		}
	}
	mutating := 0
	for _, c := range cmds {
		if !strings.Contains(c, "-X POST") && !strings.Contains(c, "-X DELETE") {
			continue
		}
		mutating++
		if !strings.Contains(c, "Content-Type: application/json") {
			t.Errorf("deploy/README.md: a state-changing curl without -H 'Content-Type: application/json':%s", c)
		}
	}
	if mutating < 3 {
		t.Errorf("found %d state-changing curl examples in deploy/README.md, want at least 3 (trigger, cancel, reload)", mutating)
	}
}
