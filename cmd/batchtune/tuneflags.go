package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
)

// studyArg returns the study file given as the one argument or with
// --config; "" means the embedded demo study.
func studyArg(c *cli.Context, cmd string) (string, error) {
	flag := c.String("config")
	switch {
	case c.NArg() > 1:
		return "", usageErr(fmt.Errorf("%s: one study file at most, got %d arguments", cmd, c.NArg()))
	case c.NArg() == 1 && flag != "" && flag != c.Args().First():
		return "", usageErr(fmt.Errorf("%s: the study is given twice (--config %s and argument %s): give one", cmd, flag, c.Args().First()))
	case c.NArg() == 1:
		return c.Args().First(), nil
	}
	return flag, nil
}

// tuneLogger builds tune's logger. With a format (text or json) it logs
// every step at info level (debug when verbose) and structured is true;
// without one, only warnings reach the log (debug when verbose) and the
// plain trial lines say what happens.
func tuneLogger(w io.Writer, format string, verbose bool) (log *slog.Logger, structured bool, err error) {
	level := slog.LevelWarn
	if format != "" {
		level = slog.LevelInfo
	}
	if verbose {
		level = slog.LevelDebug
	}
	o := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, o)), format != "", nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), true, nil
	}
	return nil, false, fmt.Errorf("tune: --log-format %q: want text or json", format)
}
