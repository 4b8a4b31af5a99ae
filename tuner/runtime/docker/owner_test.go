package docker

import (
	"strings"
	"testing"
)

// TestOwnerState: the leftover sweep removes only a dead batchtune's
// trial containers (issue 15: a daemon and a one-shot tune of one study
// removed each other's live containers).
func TestOwnerState(t *testing.T) {
	alive := func(pid int) bool { return pid == 100 }
	for _, tc := range []struct {
		name, owner string
		gone        bool
		why         string
	}{
		{"this process's own", "42@here", true, ""},
		{"a live batchtune here", "100@here", false, "in use by pid 100 on host here"},
		{"a dead batchtune here (kill -9)", "200@here", true, ""},
		{"another host's: cannot check, so live", "200@there", false, "in use by pid 200 on host there"},
		{"no owner label (older batchtune)", "", true, ""},
		{"a malformed label", "nobody", true, ""},
	} {
		gone, why := ownerState(tc.owner, "42@here", "here", alive)
		if gone != tc.gone || !strings.Contains(why, tc.why) {
			t.Errorf("%s: gone %v %q, want %v %q", tc.name, gone, why, tc.gone, tc.why)
		}
	}
}
