package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/atomicfile"
	"github.com/batchtune/batchtune/tuner/daemon"
)

// defaultListen is the daemon API's address: loopback only.
const defaultListen = "127.0.0.1:8790"

// tokenEnv names the environment variable holding the API's bearer token.
const tokenEnv = "BATCHTUNE_API_TOKEN"

func daemonCommand() *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "re-tune studies on their schedules, with an HTTP API and Prometheus metrics",
		UsageText: "batchtune daemon --studies DIR [--db PATH] [--listen 127.0.0.1:8790] [--token-file FILE]\n\n" +
			"   batchtune daemon --studies /etc/batchtune/studies",
		Description: "Loads every study file (*.yaml, *.yml) of DIR; a file that does not load is\n" +
			"reported and skipped, the rest run. Each study with a schedule.cron runs on it\n" +
			"(in schedule.time_zone) as a warm-started re-tune: the incumbent and the previous\n" +
			"top candidates are re-measured, a small search follows, and a new configuration\n" +
			"replaces the incumbent only when it wins by schedule.accept_margin with\n" +
			"confidence; it is then exported and schedule.rollout is run with the export\n" +
			"path as its last argument. Studies that share a target run one after the other.\n\n" +
			"The API (GET /api/v1/studies, POST /api/v1/studies/NAME/runs, ...), /healthz,\n" +
			"/readyz, /metrics and the HTML reports (/reports, /reports/NAME: each study's\n" +
			"latest run, read-only) listen on loopback by default. Listening elsewhere needs a\n" +
			"bearer token, from --token-file or $" + tokenEnv + ": for the mutating endpoints,\n" +
			"and (--read-token auto, the default) for every read but /healthz and /readyz too,\n" +
			"since reads show study and export paths and the errors of failed runs.\n" +
			"--read-token required asks for it on loopback as well; off leaves reads open.\n\n" +
			"SIGHUP reloads the studies. SIGTERM or Ctrl-C: the trial in progress finishes,\n" +
			"the server is restored, the run is left to resume at the next start; a second\n" +
			"signal aborts the trial (still restoring the server).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "studies", Usage: "directory of study files", Required: true, EnvVars: []string{"BATCHTUNE_STUDIES"}},
			dbFlag(),
			&cli.StringFlag{Name: "listen", Usage: "address of the API and /metrics", Value: defaultListen, EnvVars: []string{"BATCHTUNE_LISTEN"}},
			&cli.StringFlag{Name: "token-file", Usage: "file holding the API's bearer token (else $" + tokenEnv + ")"},
			&cli.StringFlag{Name: "read-token", Usage: "whether reads (studies, runs, /metrics, reports) need the token: auto (off loopback only), required or off", Value: daemon.ReadTokenAuto, EnvVars: []string{"BATCHTUNE_READ_TOKEN"}},
			&cli.StringSliceFlag{Name: "allow-host", Usage: "a further host name clients use in URLs (off loopback; IP addresses and this machine's name are allowed already)"},
			&cli.StringFlag{Name: "state-dir", Usage: "runtime state (trial files, snapshots of tuned containers)", Value: filepath.Join(dataDir(), "runtime")},
			&cli.IntFlag{Name: "parallel", Usage: "most runs at once (on different targets); more than 1 lets runs disturb each other's measurements", Value: 1},
			&cli.StringFlag{Name: "log-format", Usage: "text or json", Value: "text"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every step (debug level)"},
		},
		Action: runDaemon,
	}
}

func runDaemon(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("daemon: unexpected argument %q", c.Args().First())
	}
	log, err := daemonLogger(c.String("log-format"), c.Bool("verbose"))
	if err != nil {
		return err
	}
	token, err := apiToken(c.String("token-file"))
	if err != nil {
		return err
	}
	if w := tokenFileWarning(c.String("token-file")); w != "" {
		log.Warn(w)
	}
	addr := c.String("listen")
	if err := daemon.CheckListen(addr, token); err != nil {
		return fmt.Errorf("%w: give --token-file FILE or $%s, or listen on 127.0.0.1", err, tokenEnv)
	}
	readToken, err := daemon.ResolveReadToken(c.String("read-token"), addr, token)
	switch {
	case errors.Is(err, daemon.ErrTokenRequired):
		return fmt.Errorf("%w: give --token-file FILE or $%s, or --read-token off", err, tokenEnv)
	case err != nil:
		return usageErr(fmt.Errorf("--read-token: %w", err))
	}
	if !readToken && !loopbackListen(addr) {
		log.Warn("reads are open beyond loopback (--read-token off): anyone who reaches the port sees study and export paths and the errors of failed runs", "listen", addr)
	}
	if c.Int("parallel") < 1 {
		return fmt.Errorf("daemon: --parallel must be at least 1, got %d", c.Int("parallel"))
	}
	stateDir, err := filepath.Abs(c.String("state-dir"))
	if err != nil {
		return err
	}
	dbPath := c.String("db")
	db, err := openStore(dbPath, "batchtune daemon")
	if err != nil {
		return err
	}
	defer db.Close()

	d, err := daemon.New(db, c.String("studies"), &daemon.Options{
		Logger:      log,
		StateDir:    stateDir,
		Cores:       goruntime.NumCPU(),
		Checks:      studyChecks(),
		MaxParallel: c.Int("parallel"),
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("daemon: listen: %w", err)
	}
	srv := &http.Server{
		Handler:           d.Handler(daemon.APIOptions{Token: token, ReadToken: readToken, Listen: addr, AllowedHosts: c.StringSlice("allow-host")}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	log.Info("API listening", "url", url, "token", token != "", "reads_need_token", readToken)
	infoPath := daemonInfoPath(dbPath)
	if err := writeDaemonInfo(infoPath, daemonInfo{PID: os.Getpid(), URL: url, Studies: c.String("studies"), Started: time.Now().UTC()}); err != nil {
		log.Warn("cannot record the API's address for batchtune status", "path", infoPath, "err", err)
	}
	defer os.Remove(infoPath)

	// SIGHUP reloads the studies; only this command handles it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	irq := interruptsOf(c)
	go func() {
		for {
			select {
			case <-hup:
				if _, err := d.Reload(irq.abort); err != nil {
					log.Error("reload failed; the studies loaded before stay", "err", err)
				}
			case <-irq.abort.Done():
				return
			}
		}
	}()

	// drain is closed by the first SIGTERM or SIGINT, or when the API
	// server fails: the runs stop gracefully either way.
	drain := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(drain) }) }
	go func() {
		select {
		case <-irq.graceful:
			stop()
		case <-drain:
		}
	}()
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(irq.abort, drain) }()
	var apiErr error
	select {
	case err = <-runErr:
	case apiErr = <-serveErr:
		log.Error("API server failed; stopping after the trials in progress", "err", apiErr)
		stop()
		err = <-runErr
		apiErr = fmt.Errorf("daemon: API: %w", apiErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("API shutdown", "err", serr)
	}
	return errors.Join(err, apiErr)
}

func daemonLogger(format string, verbose bool) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("daemon: --log-format: want text or json, got %q", format)
}

// loopbackListen reports whether addr (host:port) listens on loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && daemon.IsLoopback(host)
}

// apiToken reads the API's bearer token from file, else $BATCHTUNE_API_TOKEN;
// "" when neither is given.
func apiToken(file string) (string, error) {
	if file != "" {
		data, err := configs.ReadFile(file, 4<<10)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return daemon.ParseToken(string(data), file)
	}
	if v, ok := os.LookupEnv(tokenEnv); ok {
		return daemon.ParseToken(v, "$"+tokenEnv)
	}
	return "", nil
}

// daemonInfo is what a running daemon records beside its store, so that
// batchtune status finds its API.
type daemonInfo struct {
	PID     int       `json:"pid"`
	URL     string    `json:"url"`
	Studies string    `json:"studies"`
	Started time.Time `json:"started"`
}

func daemonInfoPath(db string) string { return db + ".daemon.json" }

func writeDaemonInfo(path string, info daemonInfo) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// readDaemonInfo returns the record of a daemon that is alive.
func readDaemonInfo(path string) (*daemonInfo, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var info daemonInfo
	if json.Unmarshal(data, &info) != nil || info.PID <= 0 || info.URL == "" {
		return nil, false
	}
	if err := syscall.Kill(info.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return nil, false // left by a daemon that died
	}
	return &info, true
}
