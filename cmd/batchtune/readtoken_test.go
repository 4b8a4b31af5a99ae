package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// TestStatusSendsTheTokenForReads: against a daemon whose reads need the
// token, status answers with --token-file and says 401 without it.
func TestStatusSendsTheTokenForReads(t *testing.T) {
	const token = "status-read-token-0123456789"
	db, err := store.Open(filepath.Join(t.TempDir(), "batchtune.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, err := daemon.New(db, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler(daemon.APIOptions{Token: token, ReadToken: true, Listen: "0.0.0.0:8790"}))
	t.Cleanup(srv.Close)

	_, err = statusFromAPI(context.Background(), srv.URL, "", "")
	var apiErr *daemon.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("status without the token: %v, want a 401", err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := apiToken(file)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := statusFromAPI(context.Background(), srv.URL, "", tok)
	if err != nil || !rep.fromAPI {
		t.Errorf("status with the token: %+v, %v", rep, err)
	}
}
