package probe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeREST answers :predict like TF Serving's REST API: it checks the
// columnar body, answers 503 to every 10th request, 400 to a wrong input.
func fakeREST(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/models/m:predict" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Inputs map[string][][]float64 `json:"inputs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Inputs["x"]) != 2 || len(body.Inputs["x"][0]) != 4 {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error": "input x: want shape [2,4]"}`))
			return
		}
		if n.Add(1)%10 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error": "The batch scheduling queue to which this task was submitted is full"}`))
			return
		}
		w.Write([]byte(`{"outputs": [[0.5], [0.25]]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRESTTransport(t *testing.T) {
	srv, _ := fakeREST(t)
	target := Target{RESTAddr: strings.TrimPrefix(srv.URL, "http://"), Model: "m"}
	c, err := New(context.Background(), target, &Options{Transport: REST, NoMetrics: true,
		Inputs: []InputSpec{{Name: "x", DType: "float32", Shape: []int64{-1, 4}}}, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := c.Measure(context.Background(), Load{Concurrency: 4}, fixed(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 503 is counted as gRPC's Unavailable, one request in ten.
	if r.OK == 0 || r.Errors["Unavailable"] == 0 || r.ErrorRate < 0.05 || r.ErrorRate > 0.15 {
		t.Errorf("ok %d errors %v rate %.3f", r.OK, r.Errors, r.ErrorRate)
	}

	// A payload the server refuses: Check says so in the server's words.
	c2, err := New(context.Background(), target, &Options{Transport: REST,
		Inputs: []InputSpec{{Name: "x", DType: "float32", Shape: []int64{-1, 3}}}, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Check(context.Background()); !errors.Is(err, ErrRequestsFail) || !strings.Contains(err.Error(), "want shape [2,4]") {
		t.Errorf("err = %v", err)
	}
}

func TestHTTPCode(t *testing.T) {
	for s, want := range map[int]string{200: "OK", 400: "InvalidArgument", 404: "NotFound", 429: "ResourceExhausted",
		503: "Unavailable", 504: "DeadlineExceeded", 500: "Internal", 418: "Unknown"} {
		if got := httpCode(s).String(); got != want {
			t.Errorf("httpCode(%d) = %s, want %s", s, got, want)
		}
	}
}
