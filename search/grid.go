package search

import "context"

// Grid suggests every runnable configuration of the space in grid order:
// parameters in declared order, the last one varying fastest, values in
// the order Space.Params lists them. It has no settings and ignores the
// seed: its order is the space's.
type Grid struct{}

var _ Strategy = (*Grid)(nil)

// Name is "grid".
func (*Grid) Name() string { return "grid" }

// Validate accepts every space: a grid has no settings.
func (*Grid) Validate(*Space) error { return nil }

// Suggest returns the first req.N runnable configurations in grid order that
// no finished trial has run.
func (*Grid) Suggest(ctx context.Context, req Request) ([]Suggestion, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	s := req.Space
	pts, err := s.unseenRunnable(ctx, takenFrom(req.Space, req.History), req.N)
	if err != nil {
		return nil, err
	}
	out := make([]Suggestion, len(pts))
	for i, idx := range pts {
		out[i] = Suggestion{Config: s.configAt(idx), Reason: "grid order"}
	}
	return out, nil
}
