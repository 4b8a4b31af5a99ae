package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batchtune/batchtune/tfserving"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func statusOf(state tfserving.ModelVersionStatus_State, code int32, msg string) func() (*tfserving.GetModelStatusResponse, error) {
	return func() (*tfserving.GetModelStatusResponse, error) {
		return &tfserving.GetModelStatusResponse{ModelVersionStatus: []*tfserving.ModelVersionStatus{
			{Version: 3, State: state, Status: &tfserving.StatusProto{ErrorCode: code, ErrorMessage: msg}},
		}}, nil
	}
}

func TestWaitReadyGRPC(t *testing.T) {
	tests := []struct {
		name    string
		addr    func(t *testing.T) string
		version int64
		timeout time.Duration
		reason  ReadyReason // "" means ready
		is      error
		detail  string
		fast    bool // the verdict must come well before the timeout
	}{
		// AVAILABLE at once.
		{"available", func(t *testing.T) string { return startFake(t, &fakeServer{}) }, 0, 5 * time.Second, "", nil, "", true},
		// Nothing listens: connection refused, reported at the deadline.
		{"refused", freeAddr, 0, 400 * time.Millisecond, ReasonUnreachable, ErrUnreachable, "connection refused", false},
		// The server does not know the model: final at once.
		{"not found", func(t *testing.T) string {
			return startFake(t, &fakeServer{status: func() (*tfserving.GetModelStatusResponse, error) {
				return nil, status.Error(codes.NotFound, "Could not find any versions of model m")
			}})
		}, 0, 5 * time.Second, ReasonNotFound, ErrModelNotFound, "Could not find", true},
		// Still LOADING at the deadline.
		{"loading", func(t *testing.T) string {
			return startFake(t, &fakeServer{status: statusOf(tfserving.ModelVersionStatus_LOADING, 0, "")})
		}, 0, 400 * time.Millisecond, ReasonLoading, ErrNotReady, "version 3 LOADING", false},
		// END with an error: the load failed, final at once.
		{"failed", func(t *testing.T) string {
			return startFake(t, &fakeServer{status: statusOf(tfserving.ModelVersionStatus_END, 8, "OOM allocating batch")})
		}, 0, 5 * time.Second, ReasonFailed, ErrModelFailed, "OOM allocating batch", true},
		// A pinned version the server does not list.
		{"wrong version", func(t *testing.T) string { return startFake(t, &fakeServer{}) }, 7, 5 * time.Second, ReasonNotFound, ErrModelNotFound, "version 7", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := WaitReady(context.Background(), Target{Addr: tt.addr(t), Model: "m", Version: tt.version}, tt.timeout, nil)
			took := time.Since(start)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			} else {
				var re *ReadyError
				if !errors.As(err, &re) || re.Reason != tt.reason || !errors.Is(err, tt.is) || !errors.Is(err, ErrNotReady) {
					t.Fatalf("err = %v, want reason %s wrapping %v", err, tt.reason, tt.is)
				}
				if !strings.Contains(err.Error(), tt.detail) {
					t.Errorf("error %q does not say %q", err, tt.detail)
				}
			}
			if tt.fast && took > time.Second {
				t.Errorf("took %s", took)
			}
			if !tt.fast && took < tt.timeout {
				t.Errorf("gave up after %s, before the %s timeout", took, tt.timeout)
			}
		})
	}
}

// A server that opens its port late (as TF Serving does after loading) is
// seen within a few hundred milliseconds, not after gRPC's default
// reconnect backoff.
func TestWaitReadyLateServer(t *testing.T) {
	addr := freeAddr(t)
	go func() {
		time.Sleep(500 * time.Millisecond)
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		lis.Close() // hand the port to the real server below
		startFakeAt(t, addr, &fakeServer{})
	}()
	start := time.Now()
	if err := WaitReady(context.Background(), Target{Addr: addr, Model: "m"}, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("ready after %s; the port opened at 0.5s", took)
	}
}

// The caller's cancel (the tuner's "server process died") ends the wait at
// once, with the cause.
func TestWaitReadyCancel(t *testing.T) {
	cause := errors.New("server exited: status 1")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	err := WaitReady(ctx, Target{Addr: freeAddr(t), Model: "m"}, time.Minute, nil)
	if !errors.Is(err, cause) {
		t.Fatalf("err = %v, want the cause", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returned %s after the cancel", took-200*time.Millisecond)
	}
}

func TestWaitReadyREST(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		reason  ReadyReason
		detail  string
	}{
		// TF Serving's REST status for an available model.
		{"available", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/models/m" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(`{"model_version_status":[{"version":"1","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`))
		}, "", ""},
		// 404 with TF's error body.
		{"not found", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"Could not find any versions of model m"}`))
		}, ReasonNotFound, "Could not find"},
		// LOADING until the deadline.
		{"loading", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"model_version_status":[{"version":"1","state":"LOADING","status":{"error_code":"OK","error_message":""}}]}`))
		}, ReasonLoading, "LOADING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			err := WaitReady(context.Background(), Target{RESTAddr: strings.TrimPrefix(srv.URL, "http://"), Model: "m"}, 300*time.Millisecond, &ReadyOptions{REST: true})
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var re *ReadyError
			if !errors.As(err, &re) || re.Reason != tt.reason || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("err = %v, want %s saying %q", err, tt.reason, tt.detail)
			}
		})
	}
	// Nothing listening on the REST port.
	err := WaitReady(context.Background(), Target{RESTAddr: freeAddr(t), Model: "m"}, 200*time.Millisecond, &ReadyOptions{REST: true})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v, want unreachable: connection refused", err)
	}
}

func TestWaitReadyBadInput(t *testing.T) {
	for _, tg := range []Target{{Addr: "127.0.0.1:1"}, {Addr: "nonsense", Model: "m"}} {
		if err := WaitReady(context.Background(), tg, time.Second, nil); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: err = %v, want ErrBadOptions", tg, err)
		}
	}
}
