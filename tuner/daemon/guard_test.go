package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/batchtune/batchtune/tuner/daemon"
)

// send does one request with the given headers; "Host" sets the Host
// header itself.
func (a *apiRig) send(t *testing.T, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestGuardRefusesCrossSiteRequests: the requests of issue 15, as a page
// in the operator's browser would send them to the default loopback
// listener with no token; none may start, cancel or reload anything.
func TestGuardRefusesCrossSiteRequests(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{})
	a.start()
	api := daemon.PathAPI
	paths := []struct{ method, path string }{
		{"POST", api + "/studies/s/runs"},
		{"POST", api + "/studies/s/runs/current/cancel"},
		{"DELETE", api + "/studies/s/runs/current"},
		{"POST", api + "/reload"},
	}
	cases := []struct {
		name   string
		header []string
		code   int
		want   string
	}{
		// curl -X POST -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary ''
		{"evil origin, text/plain, empty body", []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, 403, `http://evil.example`},
		// The same page sending JSON (a browser would preflight; curl need not).
		{"evil origin, JSON", []string{"Origin", "http://evil.example", "Content-Type", "application/json"}, 403, `may not change anything`},
		// A sandboxed page sends Origin: null.
		{"null origin", []string{"Origin", "null", "Content-Type", "application/json"}, 403, `from origin \"null\"`},
		// A browser's fetch metadata, even without Origin.
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403, `Sec-Fetch-Site: cross-site`},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site", "Content-Type", "application/json"}, 403, `cross-site request`},
		// A simple request (form or text/plain) with no Origin at all.
		{"text/plain, no origin", []string{"Content-Type", "text/plain"}, 415, `Content-Type: application/json (even with no body)`},
		{"form, no origin", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, `X-Batchtune-Request`},
		{"no content type, empty body", nil, 415, `got Content-Type none`},
		// DNS rebinding: the page's own name resolved to 127.0.0.1.
		{"rebinding Host", []string{"Host", "attacker.example:8790", "Content-Type", "application/json"}, 421, `DNS rebinding`},
	}
	for _, p := range paths {
		for _, tc := range cases {
			code, body := a.send(t, p.method, p.path, "", tc.header...)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s, %s: %d %s\nwant %d and %q", p.method, p.path, tc.name, code, body, tc.code, tc.want)
			}
		}
	}
	a.runner.none(t, "a cross-site request started a run")

	// Reads through a rebinding name are refused too: they expose paths
	// and errors.
	for _, p := range []string{"/healthz", "/metrics", api + "/studies", api + "/studies/s/runs"} {
		if code, body := a.send(t, "GET", p, "", "Host", "attacker.example"); code != 421 || !strings.Contains(body, `Host \"attacker.example\"`) {
			t.Errorf("GET %s with Host attacker.example: %d %s, want 421", p, code, body)
		}
	}
	// Loopback names are the daemon's.
	for _, h := range []string{"localhost:8790", "LOCALHOST", "127.0.0.1:8790", "[::1]:8790", "127.0.0.2"} {
		if code, body := a.send(t, "GET", api+"/studies", "", "Host", h); code != 200 {
			t.Errorf("GET with Host %s: %d %s, want 200", h, code, body)
		}
	}
	// A same-origin request, or one from curl or batchtune with the JSON
	// type or the custom header, goes through.
	origin := a.srv.URL // http://127.0.0.1:PORT
	if code, body := a.send(t, "POST", api+"/reload", "", "Origin", origin, "Content-Type", "application/json"); code != 200 {
		t.Errorf("same-origin reload: %d %s, want 200", code, body)
	}
	if code, body := a.send(t, "POST", api+"/reload", "", "Sec-Fetch-Site", "same-origin", daemon.HeaderRequestedBy, "1"); code != 200 {
		t.Errorf("reload with the custom header: %d %s, want 200", code, body)
	}
	a.runner.none(t, "reloads start no run")
	if code, body := a.send(t, "POST", api+"/studies/s/runs", "", "Content-Type", "application/json; charset=utf-8"); code != 202 {
		t.Errorf("trigger with JSON and no body: %d %s, want 202", code, body)
	}
	a.runner.next(t)
}

// TestGuardOffLoopback: listening on every interface, IP addresses, the
// machine's name and allowed names are the daemon's; other names are not.
func TestGuardOffLoopback(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: testToken, Listen: "0.0.0.0:8790", AllowedHosts: []string{"batchtune.tuning.svc"}})
	for _, tc := range []struct {
		host string
		code int
	}{
		{"10.1.2.3:8790", 200},             // a pod IP (Kubernetes probes)
		{"[fd00::5]:8790", 200},            // an IPv6 address
		{"batchtune.tuning.svc:8790", 200}, // --allow-host
		{"BATCHTUNE.TUNING.SVC.", 200},     // case and a trailing dot
		{"localhost", 200},
		{"attacker.example", 421},
	} {
		code, body := a.send(t, "GET", "/healthz", "", "Host", tc.host)
		if code != tc.code {
			t.Errorf("Host %q: %d %s, want %d", tc.host, code, body, tc.code)
		}
		if code == 421 && !strings.Contains(body, "--allow-host") {
			t.Errorf("Host %q: %s, want a hint at --allow-host", tc.host, body)
		}
	}
}

// TestBearerSchemeIgnoresCase: RFC 9110 auth schemes are case-insensitive.
func TestBearerSchemeIgnoresCase(t *testing.T) {
	a := newAPIRig(t, daemon.APIOptions{Token: testToken})
	a.start()
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		code, body := a.send(t, "POST", daemon.PathAPI+"/reload", "", "Content-Type", "application/json", "Authorization", scheme+" "+testToken)
		if code != 200 {
			t.Errorf("%s TOKEN: %d %s, want 200", scheme, code, body)
		}
	}
	if code, _ := a.send(t, "POST", daemon.PathAPI+"/reload", "", "Content-Type", "application/json", "Authorization", "Basic "+testToken); code != 401 {
		t.Errorf("Basic TOKEN: %d, want 401", code)
	}
}
