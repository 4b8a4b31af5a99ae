package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/runtime"
)

// Parallel trials (search.parallelism above 1, on a runtime.Concurrent):
// the search runs in rounds of up to N trials from the strategy's batch
// suggestions, each trial in a slot of its own (a pod per node or device).
// Nodes differ, so when the search's trials ran on more than one node the
// baseline is measured once on each of them (role reference) and a search
// trial's objective is read, for ranking, as if measured on the run's
// first node: times that node's reference over its own. Confirmation then
// runs every candidate on that one node, so the verdict compares like
// with like.

// runRound runs trs (each stored as suggested) at the same time, trs[i]
// in slot i with launches[i], and returns the first error a trial
// returned (ErrInterrupted first, so that an interruption is not reported
// as something else).
func (t *Tuner) runRound(ctx context.Context, trs []*store.Trial, launches []runtime.Config, sts []stage) error {
	if len(trs) == 1 {
		return t.runTrialIn(ctx, 0, trs[0], launches[0], sts[0])
	}
	errs := make([]error, len(trs))
	var wg sync.WaitGroup
	for i := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.runTrialIn(ctx, i, trs[i], launches[i], sts[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrInterrupted) {
			return err
		}
	}
	return errors.Join(errs...)
}

// start starts launch's server in slot (slot 0 on a runtime that runs one
// server at a time).
func (t *Tuner) start(ctx context.Context, slot int, launch runtime.Config) (runtime.Server, error) {
	if c, ok := t.rt.(runtime.Concurrent); ok {
		return c.StartSlot(ctx, slot, launch)
	}
	if slot != 0 {
		return nil, fmt.Errorf("slot %d: the runtime runs one server at a time", slot)
	}
	return t.rt.Start(ctx, launch)
}

// searchNodes returns the distinct nodes the run's search trials ran on,
// the first one first (the node the run compares on).
func searchNodes(trials []store.Trial) []string {
	var out []string
	for _, tr := range trials {
		if tr.Role == store.RoleSearch && tr.Node != "" && !slices.Contains(out, tr.Node) {
			out = append(out, tr.Node)
		}
	}
	return out
}

// nodeFactors returns, when the search ran on more than one node, what
// each node's objectives are multiplied by to read as measured on the
// first node: the first node's reference objective over this node's. A
// node without a measured reference has no factor (its trials are taken
// as they are). Nil with one node or none.
func nodeFactors(trials []store.Trial) map[string]float64 {
	nodes := searchNodes(trials)
	if len(nodes) < 2 {
		return nil
	}
	sum, n := map[string]float64{}, map[string]int{}
	for _, tr := range trials {
		if tr.Role == store.RoleReference && tr.State == store.TrialSucceeded && tr.Objective != nil && *tr.Objective > 0 {
			sum[tr.Node] += *tr.Objective
			n[tr.Node]++
		}
	}
	if n[nodes[0]] == 0 {
		return nil
	}
	home := sum[nodes[0]] / float64(n[nodes[0]])
	out := map[string]float64{}
	for _, node := range nodes {
		if n[node] > 0 {
			out[node] = home / (sum[node] / float64(n[node]))
		}
	}
	return out
}

// onFirstNode returns trials with each search trial's objective read as
// if measured on the run's first node (nodeFactors); trials itself is not
// changed. With one node it returns trials.
func onFirstNode(trials []store.Trial) []store.Trial {
	f := nodeFactors(trials)
	if f == nil {
		return trials
	}
	out := slices.Clone(trials)
	for i := range out {
		tr := &out[i]
		if k, ok := f[tr.Node]; ok && tr.Role == store.RoleSearch && tr.Objective != nil {
			v := *tr.Objective * k
			tr.Objective = &v
		}
	}
	return out
}

// pinNode is the node confirmation runs on: the search's first node when
// the search used several, else "" (anywhere).
func pinNode(trials []store.Trial) string {
	if nodes := searchNodes(trials); len(nodes) > 1 {
		return nodes[0]
	}
	return ""
}

// measureReferences measures the baseline on every node of the search
// that has no reference yet, once the search has used more than one node,
// the nodes at the same time (each pinned to its node).
func (t *Tuner) measureReferences(ctx context.Context, run *store.Run, trials []store.Trial) ([]store.Trial, error) {
	nodes := searchNodes(trials)
	if len(nodes) < 2 {
		return trials, nil
	}
	have := map[string]bool{}
	for _, tr := range trials {
		if tr.Role == store.RoleReference && tr.State.Terminal() && tr.State != store.TrialInterrupted {
			have[tr.Node] = true
		}
	}
	var (
		trs      []*store.Trial
		launches []runtime.Config
		sts      []stage
	)
	for _, node := range nodes {
		if have[node] {
			continue
		}
		tr := &store.Trial{Study: t.study.Name, Run: run.ID, Role: store.RoleReference, Config: t.baseline.params, State: store.TrialSuggested,
			Why: "reference: the baseline (" + t.baseline.label + ") on node " + node + ", to compare the nodes' trials"}
		st := stage{name: StageSearch}
		if err := t.put(ctx, tr, st, true); err != nil {
			return trials, err
		}
		l := t.baseline.launch
		l.Node = node
		trs, launches, sts = append(trs, tr), append(launches, l), append(sts, st)
	}
	for i := 0; i < len(trs); i += t.par {
		j := min(i+t.par, len(trs))
		err := t.runRound(ctx, trs[i:j], launches[i:j], sts[i:j])
		for _, tr := range trs[i:j] {
			trials = append(trials, *tr)
		}
		if err != nil {
			return trials, err
		}
	}
	return trials, nil
}
