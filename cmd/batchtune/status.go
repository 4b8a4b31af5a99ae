package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/tuner/daemon"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show each study's state, latest run and recommendation",
		UsageText: "batchtune status [--api URL] [--token-file FILE] [--db PATH] [--json] [STUDY]",
		Description: "Asks the daemon's API when --api is given or a daemon is running on the store\n" +
			"(it records its address beside it); then the state, next scheduled run and run\n" +
			"in progress are shown too. Otherwise reads the store read-only, which works\n" +
			"while a tune or a daemon holds it. A daemon listening beyond loopback wants its\n" +
			"bearer token for reads too: --token-file or $" + tokenEnv + ".",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "api", Usage: "the daemon's API, e.g. http://127.0.0.1:8790", EnvVars: []string{"BATCHTUNE_API"}},
			&cli.StringFlag{Name: "token-file", Usage: "file holding the daemon's bearer token (else $" + tokenEnv + ")"},
			dbFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the status as JSON"},
		},
		Action: runStatus,
	}
}

// statusReport is what status prints: studies and where they were read.
type statusReport struct {
	Source   string               `json:"source"`
	Studies  []daemon.StudyStatus `json:"studies"`
	Problems []daemon.LoadProblem `json:"problems,omitempty"`
	Queue    []daemon.QueuedRun   `json:"queue,omitempty"`
	fromAPI  bool
}

func runStatus(c *cli.Context) error {
	if c.NArg() > 1 {
		return fmt.Errorf("status: at most one study, got %d arguments", c.NArg())
	}
	name := c.Args().First()
	token, err := apiToken(c.String("token-file"))
	if err != nil {
		return err
	}
	var rep *statusReport
	switch api := c.String("api"); {
	case api != "":
		rep, err = statusFromAPI(c.Context, api, name, token)
	default:
		if info, ok := readDaemonInfo(daemonInfoPath(c.String("db"))); ok {
			rep, err = statusFromAPI(c.Context, info.URL, name, token)
			if err != nil {
				fmt.Fprintf(os.Stderr, "batchtune: the daemon (pid %d) did not answer at %s (%v); reading the store\n", info.PID, info.URL, err)
			}
		}
		if rep == nil {
			rep, err = statusFromStore(c.Context, c.String("db"), name)
		}
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printStatus(c.App.Writer, rep, time.Now())
	return nil
}

func statusFromAPI(ctx context.Context, url, name, token string) (*statusReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl := daemon.NewClient(url, &http.Client{Timeout: 10 * time.Second}, token)
	rep := &statusReport{Source: "daemon API at " + url, fromAPI: true}
	if name != "" {
		s, err := cl.Study(ctx, name)
		if err != nil {
			return nil, err
		}
		rep.Studies = []daemon.StudyStatus{*s}
		return rep, nil
	}
	all, err := cl.Studies(ctx)
	if err != nil {
		return nil, err
	}
	rep.Studies, rep.Problems, rep.Queue = all.Studies, all.Problems, all.Queue
	return rep, nil
}

// statusFromStore reads what the store knows: each study's latest run and
// incumbent. A run the store holds unfinished is shown as such: running in
// another process, or interrupted and waiting to be resumed.
func statusFromStore(ctx context.Context, path, name string) (*statusReport, error) {
	db, err := openStoreRO(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rep := &statusReport{Source: "store " + path + " (read-only; no daemon answering)"}
	var names []string
	if name != "" {
		if _, err := db.Study(ctx, name); err != nil {
			return nil, err
		}
		names = []string{name}
	} else {
		studies, err := db.Studies(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range studies {
			names = append(names, s.Name)
		}
	}
	for _, n := range names {
		st := daemon.StudyStatus{Name: n, State: "-"}
		runs, err := db.Runs(ctx, n)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if len(runs) > 0 {
			last := runs[len(runs)-1]
			st.LastRun = &last
			if last.State.Unfinished() {
				st.State = "unfinished"
			}
		}
		if r := store.LastIncumbentCheck(runs); r != nil {
			st.Degraded, st.Degradation = r.Degraded, *r.Degradation
		}
		inc, err := db.Incumbent(ctx, n)
		switch {
		case err == nil:
			st.Incumbent = inc
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		rep.Studies = append(rep.Studies, st)
	}
	return rep, nil
}

func printStatus(w io.Writer, rep *statusReport, now time.Time) {
	fmt.Fprintf(w, "source: %s\n", rep.Source)
	if len(rep.Studies) == 0 {
		fmt.Fprintln(w, "no studies")
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "study\tstate\tnext run\tlatest run\toutcome\tincumbent")
	for _, s := range rep.Studies {
		state := s.State
		if s.Degraded {
			state += " DEGRADED"
		}
		next := "-"
		switch {
		case s.Schedule != nil && !s.Schedule.Next.IsZero():
			next = fmt.Sprintf("%s (in %s)", s.Schedule.Next.Format("2006-01-02 15:04 MST"), s.Schedule.Next.Sub(now).Round(time.Second))
		case rep.fromAPI && s.Schedule == nil:
			next = "on demand"
		}
		last, outcome := "-", "-"
		if r := s.LastRun; r != nil {
			last = fmt.Sprintf("%d %s %s %s", r.ID, r.Kind, r.State, r.Started.Local().Format("2006-01-02 15:04"))
			if r.Outcome != "" {
				outcome = string(r.Outcome)
			}
		}
		inc := "-"
		if r := s.Incumbent; r != nil {
			inc = fmt.Sprintf("#%d (run %d) %s", r.Seq, r.Run, compactConfig(r.Config))
			if r.Capacity > 0 {
				inc += " " + capacityText(r)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, state, next, last, outcome, inc)
	}
	tw.Flush()
	for _, s := range rep.Studies {
		if p := s.Current; p != nil {
			line := fmt.Sprintf("%s: run %d (%s) %s", s.Name, p.Run, p.Reason, p.Stage)
			if p.Total > 0 {
				line += fmt.Sprintf(" %d/%d", p.Index, p.Total)
			}
			if p.Trial != 0 {
				line += fmt.Sprintf(", trial %d %s", p.Trial, p.TrialState)
			}
			if p.Best != nil {
				line += fmt.Sprintf(", best %.1f", *p.Best)
			}
			fmt.Fprintf(w, "%s, for %s\n", line, now.Sub(p.Started).Round(time.Second))
		}
		if d := s.LastDecision; d != nil && d.Message != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Name, d.Message)
		}
		if s.LastError != "" {
			fmt.Fprintf(w, "%s: last run failed: %s\n", s.Name, truncate(s.LastError, 200))
		}
		if r := s.LastRollout; r != nil && r.Result != daemon.RolloutOK {
			fmt.Fprintf(w, "%s: rollout of recommendation %d %s: %s\n", s.Name, r.Recommendation, r.Result, truncate(strings.TrimSpace(r.Error+" "+r.Output), 200))
		}
	}
	for _, p := range rep.Problems {
		msg := fmt.Sprintf("skipped %s: %s", p.File, truncate(p.Error, 300))
		if p.Kept != "" {
			msg += fmt.Sprintf(" (study %s keeps its previous version)", p.Kept)
		}
		fmt.Fprintln(w, msg)
	}
}
