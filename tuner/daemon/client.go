package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to a running daemon's API (batchtune status uses it).
type Client struct {
	base  string
	http  *http.Client
	token string
}

// NewClient returns a client of the API at base ("http://127.0.0.1:8787");
// hc nil is http.DefaultClient; token, when set, is sent on every request.
func NewClient(base string, hc *http.Client, token string) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), http: hc, token: token}
}

// APIError is an error response of the API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("daemon API: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Studies returns every study's status.
func (c *Client) Studies(ctx context.Context) (*StudiesStatus, error) {
	var out StudiesStatus
	return &out, c.do(ctx, http.MethodGet, PathAPI+"/studies", nil, &out)
}

// Study returns one study's status.
func (c *Client) Study(ctx context.Context, name string) (*StudyStatus, error) {
	var out StudyStatus
	return &out, c.do(ctx, http.MethodGet, PathAPI+"/studies/"+url.PathEscape(name), nil, &out)
}

// Trigger queues a run of the study.
func (c *Client) Trigger(ctx context.Context, name string, t TriggerOptions) (*QueuedRun, error) {
	var out QueuedRun
	return &out, c.do(ctx, http.MethodPost, PathAPI+"/studies/"+url.PathEscape(name)+"/runs", t, &out)
}

// Cancel cancels run ("current" or a run number) of the study.
func (c *Client) Cancel(ctx context.Context, name, run string) (*CancelResult, error) {
	var out CancelResult
	return &out, c.do(ctx, http.MethodPost, PathAPI+"/studies/"+url.PathEscape(name)+"/runs/"+url.PathEscape(run)+"/cancel", nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if method != http.MethodGet {
		// Even with no body: the API refuses a state-changing request
		// without it (a browser's cross-site request cannot send it).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorBody
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("daemon API: %s %s: %w", method, path, err)
	}
	return nil
}
