package daemon_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestResolveReadToken: reads need the token off loopback unless the
// operator says off; required with no token is refused.
func TestResolveReadToken(t *testing.T) {
	for _, tc := range []struct {
		name, mode, listen, token string
		want                      bool
		err                       string
	}{
		// The default on loopback: only this machine's users reach it.
		{"auto on loopback", "auto", "127.0.0.1:8790", "", false, ""},
		{"empty is auto", "", "[::1]:8790", tok, false, ""},
		// The default elsewhere: reads show paths and errors.
		{"auto on every interface", "auto", "0.0.0.0:8790", tok, true, ""},
		{"auto on no host", "", ":8790", tok, true, ""},
		{"auto on a LAN address", "auto", "10.1.2.3:8790", tok, true, ""},
		// The operator's choice, either way.
		{"off off loopback", "off", "0.0.0.0:8790", tok, false, ""},
		{"required on loopback", "required", "127.0.0.1:8790", tok, true, ""},
		{"case and spaces", " Required ", "127.0.0.1:8790", tok, true, ""},
		// Nobody could read anything.
		{"required without a token", "required", "127.0.0.1:8790", "", false, "none is set"},
		{"auto off loopback without a token", "auto", "0.0.0.0:8790", "", false, "none is set"},
		{"unknown mode", "sometimes", "127.0.0.1:8790", tok, false, `want auto, required or off, got "sometimes"`},
		{"bad address", "auto", "8790", tok, false, "listen address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := daemon.ResolveReadToken(tc.mode, tc.listen, tc.token)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := daemon.ResolveReadToken("required", "127.0.0.1:1", ""); !errors.Is(err, daemon.ErrTokenRequired) {
		t.Errorf("required without a token: %v, want ErrTokenRequired", err)
	}
}

const tok = testToken

// TestReadTokenRequired: off loopback with reads closed (the default
// there), the study, run and report endpoints and /metrics answer 401
// without the token and 200 with it; the health checks stay open, and
// /readyz does not say why it is not ready to a caller without it.
func TestReadTokenRequired(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: tok, ReadToken: true, Listen: "0.0.0.0:8790"})
	bearer := []string{"Authorization", "Bearer " + tok}

	// Before Run: not ready; the reason is for token holders.
	if code, body := a.send(t, "GET", daemon.PathReady, ""); code != 503 || strings.Contains(body, "starting") || !strings.Contains(body, "needs the API's token") {
		t.Errorf("/readyz without the token, not ready: %d %s", code, body)
	}
	if code, body := a.send(t, "GET", daemon.PathReady, "", bearer...); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("/readyz with the token, not ready: %d %s", code, body)
	}
	a.start()

	reads := []string{
		daemon.PathAPI + "/studies",
		daemon.PathAPI + "/studies/s",
		daemon.PathAPI + "/studies/s/runs",
		daemon.PathAPI + "/studies/s/recommendations",
		daemon.PathMetrics,
		daemon.PathReports,
	}
	for _, path := range reads {
		code, body := a.send(t, "GET", path, "")
		if code != 401 || !strings.Contains(body, "bearer token") || strings.Contains(body, a.out) {
			t.Errorf("GET %s without the token: %d %.200s, want 401 showing nothing", path, code, body)
		}
		if code, body := a.send(t, "GET", path, "", "Authorization", "Bearer wrong-token-0123456789"); code != 401 {
			t.Errorf("GET %s with a wrong token: %d %.200s, want 401", path, code, body)
		}
		if code, body := a.send(t, "GET", path, "", bearer...); code != 200 {
			t.Errorf("GET %s with the token: %d %.200s, want 200", path, code, body)
		}
	}
	// What the gate protects: the study's export path is in its status.
	if _, body := a.send(t, "GET", daemon.PathAPI+"/studies/s", "", bearer...); !strings.Contains(body, "s.config") && !strings.Contains(body, "s.yaml") {
		t.Errorf("the study's status with the token shows no path: %.300s", body)
	}
	if _, body := a.send(t, "GET", daemon.PathMetrics, "", bearer...); !strings.Contains(body, "batchtune_") {
		t.Errorf("/metrics with the token: no batchtune_ metrics")
	}
	for _, path := range []string{daemon.PathHealth, daemon.PathReady} {
		if code, body := a.send(t, "GET", path, ""); code != 200 {
			t.Errorf("GET %s without the token: %d %s, want 200 (probes carry no token)", path, code, body)
		}
	}
	// Writes need it as before.
	if code, _ := a.send(t, "POST", daemon.PathAPI+"/reload", "", "Content-Type", "application/json"); code != 401 {
		t.Errorf("POST reload without the token: %d, want 401", code)
	}
	if code, body := a.send(t, "POST", daemon.PathAPI+"/reload", "", "Content-Type", "application/json", bearer[0], bearer[1]); code != 200 {
		t.Errorf("POST reload with the token: %d %s, want 200", code, body)
	}
}

// TestReadTokenOff: the operator's choice to leave reads open off
// loopback (--read-token off): reads answer without the token, writes
// still need it.
func TestReadTokenOff(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: tok, ReadToken: false, Listen: "0.0.0.0:8790"})
	a.start()
	for _, path := range []string{daemon.PathAPI + "/studies", daemon.PathAPI + "/studies/s/runs", daemon.PathMetrics, daemon.PathReports} {
		if code, body := a.send(t, "GET", path, ""); code != 200 {
			t.Errorf("GET %s without the token, reads open: %d %.200s, want 200", path, code, body)
		}
	}
	if code, _ := a.send(t, "POST", daemon.PathAPI+"/reload", "", "Content-Type", "application/json"); code != 401 {
		t.Errorf("POST reload without the token: %d, want 401", code)
	}
}

// TestReadTokenWithoutTokenFailsClosed: a handler told that reads need a
// token it was not given refuses them rather than serving them open.
func TestReadTokenWithoutTokenFailsClosed(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{ReadToken: true})
	a.start()
	if code, _ := a.send(t, "GET", daemon.PathAPI+"/studies", ""); code != 401 {
		t.Errorf("GET studies: %d, want 401", code)
	}
	if code, _ := a.send(t, "GET", daemon.PathHealth, ""); code != 200 {
		t.Errorf("GET /healthz: %d, want 200", code)
	}
}
