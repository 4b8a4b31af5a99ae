package daemon

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// HeaderRequestedBy is the custom header a client may send instead of a
// JSON content type on a state-changing request with no body. A browser
// cannot send it (nor application/json) to another origin without a CORS
// preflight, which the API never grants.
const HeaderRequestedBy = "X-Batchtune-Request"

// guard is the API's outermost layer. It stops a web page in the
// operator's browser from driving or reading the daemon:
//
//   - DNS rebinding: the Host header must name this daemon (a loopback
//     name or address when it listens on loopback; an IP address, the
//     listener's or machine's name, or an allowed host otherwise), so a
//     page whose own name resolves to 127.0.0.1 is refused.
//   - Cross-site requests: a state-changing request (anything but GET,
//     HEAD, OPTIONS) is refused when Sec-Fetch-Site says another site,
//     or its Origin is not the daemon's own; and it must carry
//     Content-Type: application/json or the X-Batchtune-Request header,
//     even with an empty body. A page can send neither cross-origin
//     without a preflight, which is never answered with CORS headers.
type guard struct {
	next     http.Handler
	loopback bool            // the listener is loopback only
	hosts    map[string]bool // allowed Host names (lower case, no port) beyond the rules
}

// newGuard wraps next. listen is the listener's address (host:port; ""
// means loopback, as a test server's); allowed adds host names a client
// may use (a DNS name of the machine, a Kubernetes service).
func newGuard(next http.Handler, listen string, allowed []string) *guard {
	g := &guard{next: next, loopback: true, hosts: map[string]bool{}}
	if listen != "" {
		if host, _, err := net.SplitHostPort(listen); err == nil {
			g.loopback = host != "" && IsLoopback(host)
			if host != "" {
				g.hosts[strings.ToLower(host)] = true
			}
		}
	}
	if !g.loopback {
		if name, err := osHostname(); err == nil && name != "" {
			g.hosts[strings.ToLower(name)] = true
			if short, _, ok := strings.Cut(name, "."); ok {
				g.hosts[strings.ToLower(short)] = true
			}
		}
	}
	for _, h := range allowed {
		g.hosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return g
}

// osHostname is the machine's name; a variable for tests.
var osHostname = os.Hostname

// errForbidden marks the guard's refusals.
var errForbidden = errors.New("refused")

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.checkHost(r.Host); err != nil {
		writeError(w, http.StatusMisdirectedRequest, err)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		g.next.ServeHTTP(w, r)
		return
	}
	if err := g.checkSite(r); err != nil {
		writeError(w, http.StatusForbidden, err)
		return
	}
	if err := checkNotSimple(r); err != nil {
		writeError(w, http.StatusUnsupportedMediaType, err)
		return
	}
	g.next.ServeHTTP(w, r)
}

// hostOnly drops the port of a Host header value and lower-cases it.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func (g *guard) checkHost(hostport string) error {
	host := hostOnly(hostport)
	switch {
	case host == "":
		return fmt.Errorf("%w: the request has no Host header", errForbidden)
	case IsLoopback(host), host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return nil
	case g.hosts[host]:
		return nil
	case !g.loopback && net.ParseIP(host) != nil:
		return nil
	}
	if g.loopback {
		return fmt.Errorf("%w: Host %q is not this daemon's: it listens on loopback, so use 127.0.0.1 or localhost (a page whose name resolves to 127.0.0.1 is refused: DNS rebinding)", errForbidden, hostport)
	}
	return fmt.Errorf("%w: Host %q is not this daemon's: use its IP address, or start the daemon with --allow-host %s", errForbidden, hostport, host)
}

// checkSite refuses a state-changing request that a browser marks as
// coming from another site.
func (g *guard) checkSite(r *http.Request) error {
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("%w: a cross-site request (Sec-Fetch-Site: %s) may not change anything; use batchtune or curl", errForbidden, site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || origin == "null" || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("%w: a request from origin %q may not change anything here; use batchtune or curl", errForbidden, origin)
	}
	return nil
}

// checkNotSimple requires what a browser cannot send cross-origin without
// a preflight: Content-Type application/json or the custom header.
func checkNotSimple(r *http.Request) error {
	if r.Header.Get(HeaderRequestedBy) != "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		ct = "none"
	}
	return fmt.Errorf("a request that changes something must be sent as Content-Type: application/json (even with no body) or carry the %s header; got Content-Type %s", HeaderRequestedBy, ct)
}
