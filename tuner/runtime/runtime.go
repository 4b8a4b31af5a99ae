package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Runtime starts TF Serving for one trial at a time and puts back what was
// there before. Its life is Recover, then any number of Starts, then Restore;
// one goroutine drives it (the tuner's), but Restore may be called from
// another once Start has returned.
type Runtime interface {
	// Recover puts back what an earlier batchtune left when it was killed
	// (trial processes or containers, a user's container that was stopped
	// for tuning) and claims the study's state directory, failing with
	// ErrBusy while another live batchtune holds it. Call it once, first.
	Recover(ctx context.Context) error
	// Start stops the previous trial's server, if any, and starts one with
	// cfg. It returns once the server is launched, not when it answers:
	// use WaitPorts (or the probe) and select on Server.Done. A server that
	// rejects its config is reported through Done and Exit, not by Start.
	Start(ctx context.Context, cfg Config) (Server, error)
	// Restore stops the trial server and puts back what was there before
	// the first Start (a user's container, restarted as it was), removes the
	// trial files and releases the state directory. It is idempotent and
	// must be called with a fresh context after the tuner's was cancelled.
	Restore(ctx context.Context) error
}

// Concurrent is a Runtime that runs several trial servers at once, each in
// a slot of its own, for a study's search.parallelism above 1: a trial pod
// per node, or per device the scheduler hands out. Runtimes whose trials
// would share one host's cores do not implement it (side-by-side trials
// there would measure each other).
type Concurrent interface {
	Runtime
	// StartSlot is Start for one slot (0 is the slot Start uses): it stops
	// that slot's previous server only. Calls for different slots may run
	// at the same time.
	StartSlot(ctx context.Context, slot int, cfg Config) (Server, error)
}

// Placed is a Server that knows which machine it runs on.
type Placed interface {
	// Node names the machine (a Kubernetes node); "" when not known.
	Node() string
}

// Server is one started TF Serving. Its methods are safe for concurrent use.
type Server interface {
	// Endpoints says where to reach it. Fixed for the server's life.
	Endpoints() Endpoints
	// Done is closed once the server has ended, on its own or by Stop.
	Done() <-chan struct{}
	// Exit says how it ended; the zero Exit until Done is closed.
	Exit() Exit
	// Stop ends the server (SIGTERM, then SIGKILL after the runtime's grace
	// period) and removes what the trial created. It is idempotent. When
	// ctx ends first the server is killed at once and Stop returns ctx's
	// error without waiting longer than a few seconds.
	Stop(ctx context.Context) error
}

// Endpoints are the addresses a trial server answers on, as host:port.
type Endpoints struct {
	GRPC string `json:"grpc"`
	REST string `json:"rest"`
}

// MetricsURL is the Prometheus endpoint the trial's monitoring config enables.
func (e Endpoints) MetricsURL() string { return "http://" + e.REST + MetricsPath }

// The files a runtime writes into each trial's directory, and where the
// monitoring config puts the Prometheus endpoint.
const (
	BatchingFile   = "batching.config"
	MonitoringFile = "monitoring.config"
	MetricsPath    = "/monitoring/prometheus/metrics"
)

// MonitoringConfig is the --monitoring_config_file every trial runs with, in
// protobuf text format.
func MonitoringConfig() []byte {
	return []byte("prometheus_config {\n  enable: true\n  path: \"" + MetricsPath + "\"\n}\n")
}

// Config is what varies from one trial to the next.
type Config struct {
	// Batching is the batching.config in protobuf text format, written
	// verbatim: the runtime does not validate it, the server does.
	Batching []byte
	// IntraOpParallelism and InterOpParallelism are passed as
	// --tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism;
	// 0 means TF's own choice.
	IntraOpParallelism int
	InterOpParallelism int
	// Flags are further server flags for this trial, each --name=value or
	// --name (e.g. --grpc_max_threads=8). Flags the runtime sets itself are
	// refused with ErrReservedFlag.
	Flags []string
	// Node, when set, is the machine the server must run on: a name a
	// Placed server reported. Runtimes with one machine ignore it.
	Node string
}

// Reserved are the flags every trial's command line gets from Config.Args
// or from the runtime's own port choice; a study or trial may not set them.
var Reserved = []string{
	"port", "rest_api_port",
	"enable_batching", "batching_parameters_file",
	"monitoring_config_file", "max_num_load_retries",
	"tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
}

// Validate checks c's numbers and flags and returns every problem together.
func (c Config) Validate() error {
	var errs []error
	if c.IntraOpParallelism < 0 {
		errs = append(errs, fmt.Errorf("intra_op_parallelism: must not be negative, got %d", c.IntraOpParallelism))
	}
	if c.InterOpParallelism < 0 {
		errs = append(errs, fmt.Errorf("inter_op_parallelism: must not be negative, got %d", c.InterOpParallelism))
	}
	errs = append(errs, flagErrors("flags", c.Flags, nil)...)
	return joinErrs(errs)
}

// Args returns the flags a trial adds to the server's command line, given
// where the server will find the two files (paths as the server sees them).
func (c Config) Args(batchingFile, monitoringFile string) []string {
	args := []string{
		"--enable_batching",
		"--batching_parameters_file=" + batchingFile,
		"--monitoring_config_file=" + monitoringFile,
		"--max_num_load_retries=0",
		"--tensorflow_intra_op_parallelism=" + strconv.Itoa(c.IntraOpParallelism),
		"--tensorflow_inter_op_parallelism=" + strconv.Itoa(c.InterOpParallelism),
	}
	return append(args, c.Flags...)
}

// FlagName returns the name of a --name or --name=value flag and whether
// the flag is well formed.
func FlagName(flag string) (string, bool) {
	rest, ok := strings.CutPrefix(flag, "--")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "=")
	if name == "" {
		return "", false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return "", false
		}
	}
	return name, true
}

// CheckFlags checks flags, named field in messages (field[i]), against
// FlagName's form, Reserved and the extra reserved names, and returns every
// problem together, each wrapping ErrBadFlag or ErrReservedFlag.
func CheckFlags(field string, flags []string, reserved ...string) error {
	return joinErrs(flagErrors(field, flags, reserved))
}

func flagErrors(field string, flags []string, reserved []string) []error {
	var errs []error
	for i, f := range flags {
		name, ok := FlagName(f)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s[%d]: %q: %w (want --name or --name=value)", field, i, f, ErrBadFlag))
		case isReserved(name, reserved):
			errs = append(errs, fmt.Errorf("%s[%d]: --%s: %w", field, i, name, ErrReservedFlag))
		}
	}
	return errs
}

func isReserved(name string, extra []string) bool {
	for _, r := range Reserved {
		if name == r {
			return true
		}
	}
	for _, r := range extra {
		if name == r {
			return true
		}
	}
	return false
}

// joinErrs joins errs one per line, keeping each in the chain for errors.Is.
func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return multiError(errs)
}

type multiError []error

func (m multiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(m))
	for _, e := range m {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

func (m multiError) Unwrap() []error { return m }

// Exit is how a server ended.
type Exit struct {
	// Code is the exit status, 128+n when killed by signal n (as a shell
	// and container engines report it); -1 when unknown.
	Code int `json:"code"`
	// Signal names the signal that ended it ("killed", "terminated"), if any.
	Signal string `json:"signal,omitempty"`
	// OOMKilled is set when the engine reports the kernel's OOM killer.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Stopped is set when it ended because batchtune stopped it.
	Stopped bool `json:"stopped,omitempty"`
	// Detail is the engine's own error about the server, if any.
	Detail string `json:"detail,omitempty"`
	// Log is the tail of the server's stdout and stderr.
	Log string `json:"log,omitempty"`
	// At is when the end was observed.
	At time.Time `json:"at"`
}

// ExitFromStatus fills Code and Signal from a wait status: the exit code, or
// 128+signal when a signal ended the process.
func ExitFromStatus(ws syscall.WaitStatus) Exit {
	switch {
	case ws.Exited():
		return Exit{Code: ws.ExitStatus()}
	case ws.Signaled():
		return Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal().String()}
	}
	return Exit{Code: -1}
}

// ExitFromCode fills Code and, for 129..159, Signal, from an exit code as a
// container engine reports it.
func ExitFromCode(code int) Exit {
	e := Exit{Code: code}
	if code > 128 && code < 160 {
		e.Signal = syscall.Signal(code - 128).String()
	}
	return e
}

// Reason is a one-line account of the end: how it ended and the last line
// of the log.
func (e Exit) Reason() string {
	var b strings.Builder
	switch {
	case e.Stopped:
		b.WriteString("stopped by batchtune")
	case e.OOMKilled:
		fmt.Fprintf(&b, "killed by the OOM killer (exit code %d)", e.Code)
	case e.Signal != "":
		fmt.Fprintf(&b, "killed by signal %q (exit code %d)", e.Signal, e.Code)
	default:
		fmt.Fprintf(&b, "exit code %d", e.Code)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if last := LastLine(e.Log); last != "" {
		b.WriteString(": ")
		b.WriteString(last)
	}
	return b.String()
}

// LastLine returns the last non-blank line of s, trimmed.
func LastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// ExitError reports a server that ended before it was stopped or answered.
// It wraps ErrExited; the full log tail is in Exit.Log.
type ExitError struct {
	Exit Exit
}

func (e *ExitError) Error() string { return "runtime: server exited: " + e.Exit.Reason() }

func (e *ExitError) Unwrap() error { return ErrExited }
