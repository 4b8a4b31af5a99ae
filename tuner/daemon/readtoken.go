package daemon

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Read access: whether the API's reads (the study, run and trial
// endpoints, /metrics, the reports) need the bearer token too. They
// show study file paths, export paths, the incumbent's configuration and
// the errors of failed runs: open on loopback, where only this machine's
// users reach them, but not to every machine that can reach the port.
// /healthz and /readyz stay open either way (a kubelet or load balancer
// probes them without a token); /readyz then says only whether the daemon
// is ready, not why not.
const (
	// ReadTokenAuto requires the token for reads off loopback only.
	ReadTokenAuto = "auto"
	// ReadTokenRequired requires it for every read but the health checks.
	ReadTokenRequired = "required"
	// ReadTokenOff leaves reads open (mutating requests still need the
	// token when one is set).
	ReadTokenOff = "off"
)

// ResolveReadToken decides whether reads need the token, from mode (one
// of ReadTokenAuto, ReadTokenRequired, ReadTokenOff; "" is auto), the
// listen address (host:port) and the token ("" when none is set). With
// auto, reads need the token exactly when the listener is not loopback.
// required without a token is an error: nobody could read anything.
func ResolveReadToken(mode, listen, token string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, fmt.Errorf("daemon: listen address %q: %w", listen, err)
	}
	loopback := host != "" && IsLoopback(host)
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "", ReadTokenAuto:
		if loopback {
			return false, nil
		}
	case ReadTokenRequired:
	case ReadTokenOff:
		return false, nil
	default:
		return false, fmt.Errorf("daemon: read token: want %s, %s or %s, got %q", ReadTokenAuto, ReadTokenRequired, ReadTokenOff, mode)
	}
	if token == "" {
		return false, fmt.Errorf("%w: reads need the token (read token %s on %s), but none is set", ErrTokenRequired, strings.ToLower(strings.TrimSpace(mode)), listen)
	}
	return true, nil
}

// authorized reports whether r carries the API's bearer token (true when
// no token is set).
func (a *api) authorized(r *http.Request) bool {
	return a.o.Token == "" || bearerMatches(r, a.o.Token)
}

// readGate lets a request through when it carries the token, or asks for
// the health checks; others get 401. It wraps the API when
// APIOptions.ReadToken is set; with no token set it refuses every read
// (fails closed).
func (a *api) readGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := a.o.Token != "" && bearerMatches(r, a.o.Token)
		switch {
		case r.URL.Path == PathHealth:
		case r.URL.Path == PathReady:
			if !ok {
				r = r.WithContext(withTerseReady(r.Context()))
			}
		case !ok:
			unauthorized(w, "this daemon's reads need its bearer token too (Authorization: Bearer TOKEN): it listens beyond loopback (see --read-token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized writes a 401 asking for the bearer token.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="batchtune"`)
	writeError(w, http.StatusUnauthorized, fmt.Errorf("%s", msg))
}

// bearerMatches reports whether r's Authorization header carries token
// (the scheme's case is ignored; the comparison takes constant time).
func bearerMatches(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

type terseReadyKey struct{}

func withTerseReady(ctx context.Context) context.Context {
	return context.WithValue(ctx, terseReadyKey{}, true)
}

// terseReady: /readyz was asked without the token that reads need.
func terseReady(ctx context.Context) bool { v, _ := ctx.Value(terseReadyKey{}).(bool); return v }
