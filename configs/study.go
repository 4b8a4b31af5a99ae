package configs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/batchtune/batchtune/objective"
)

// Runtimes a study's target can be started with.
const (
	RuntimeDocker  = "docker"  // a container through the Docker Engine API
	RuntimeProcess = "process" // a child process of batchtune
	// RuntimeKubernetes runs each trial as a pod on a Kubernetes cluster.
	RuntimeKubernetes = "kubernetes"
)

// Load modes.
const (
	LoadClosed = "closed" // a fixed number of requests in flight
	LoadOpen   = "open"   // requests sent at a fixed rate, whatever the server does
)

// Arrival processes of an open-loop load.
const (
	ArrivalConstant = "constant" // evenly spaced sends
	ArrivalPoisson  = "poisson"  // exponentially distributed gaps
)

// Transports the load is sent over.
const (
	TransportGRPC = "grpc" // PredictionService/Predict
	TransportREST = "rest" // POST /v1/models/NAME:predict
)

// Pull policies of the docker runtime.
const (
	PullMissing = "missing" // pull only when the image is not present
	PullAlways  = "always"
	PullNever   = "never"
)

// Objective is what a study optimises, by name: one of objective.Names(),
// which says what each means (Kind).
type Objective string

// Kind returns the objective o names.
func (o Objective) Kind() (objective.Kind, error) { return objective.Parse(string(o)) }

// Objectives, spelled as package objective names them.
const (
	// ObjectiveMaxThroughput maximises achieved requests/s at a fixed
	// closed-loop concurrency, subject to the SLO's latency quantile and
	// error budget.
	ObjectiveMaxThroughput Objective = "max_throughput"
	// ObjectiveMinLatency minimises the SLO's latency quantile at a fixed
	// open-loop rate, subject to achieving the rate within the SLO (its
	// latency quantile and error budget).
	ObjectiveMinLatency Objective = "min_latency"
	// ObjectiveMaxCapacity maximises the highest open-loop rate at which
	// the SLO holds (package capacity).
	ObjectiveMaxCapacity Objective = "max_capacity"
)

// Study is one tuning study as written in a study YAML file, with every
// unset key at its default (DefaultStudy) and relative paths resolved
// against the file's directory. LoadStudy returns only valid studies; a
// Study built in Go is checked with Validate.
type Study struct {
	// Name identifies the study in the store, the daemon's API and metric
	// labels: letters, digits, '.', '_' and '-'.
	Name         string       `yaml:"name" json:"name"`
	Target       Target       `yaml:"target" json:"target"`
	Load         Load         `yaml:"load" json:"load"`
	SLO          SLO          `yaml:"slo" json:"slo"`
	Objective    Objective    `yaml:"objective" json:"objective"`
	Space        SpaceSpec    `yaml:"space" json:"space"`
	Search       Search       `yaml:"search" json:"search"`
	Confirmation Confirmation `yaml:"confirmation" json:"confirmation"`
	Export       Export       `yaml:"export" json:"export"`
	Schedule     Schedule     `yaml:"schedule" json:"schedule"`

	// File is the path the study was loaded from ("" when built in Go).
	File string `yaml:"-" json:"-"`
	// Source is the document as read, comments included: the snapshot a
	// store keeps of what the user wrote.
	Source []byte `yaml:"-" json:"-"`

	// lines maps a field path ("load.concurrency", "target.flags[2]") to
	// the line it was written on; a path that is absent was not written.
	lines map[string]int
}

// Target says which TF Serving is tuned and how it is (re)started.
type Target struct {
	Runtime string `yaml:"runtime" json:"runtime"`
	Model   Model  `yaml:"model" json:"model"`
	Ports   Ports  `yaml:"ports" json:"ports"`
	// Flags are extra tensorflow_model_server flags ("--name=value") given
	// to every trial. Their names are checked against the server's flags
	// (an unknown flag is ignored by TF Serving, not refused); flags that
	// batchtune sets itself or that the space tunes are refused.
	Flags []string `yaml:"flags" json:"flags"`
	// StartTimeout bounds the wait for a restarted server to report the
	// model AVAILABLE (model load and the server's own warmup included).
	StartTimeout Duration         `yaml:"start_timeout" json:"start_timeout"`
	Docker       DockerTarget     `yaml:"docker" json:"docker"`
	Process      ProcessTarget    `yaml:"process" json:"process"`
	Kubernetes   KubernetesTarget `yaml:"kubernetes" json:"kubernetes"`
}

// Model names the served model.
type Model struct {
	Name string `yaml:"name" json:"name"`
	// BasePath is --model_base_path as the server sees it: a host path for
	// the process runtime, a path inside the container for docker.
	BasePath string `yaml:"base_path" json:"base_path"`
	// Signature is the signature_name requests are sent to.
	Signature string `yaml:"signature" json:"signature"`
}

// Ports are the server's ports as batchtune reaches them (host side).
type Ports struct {
	GRPC int `yaml:"grpc" json:"grpc"`
	REST int `yaml:"rest" json:"rest"`
}

// DockerTarget is the container template of the docker runtime. Exactly one
// of Image (a trial container is created per trial) and Container (an
// existing container is tuned in place and restored afterwards) is set.
type DockerTarget struct {
	Image     string `yaml:"image" json:"image"`
	Container string `yaml:"container" json:"container"`
	// ModelDir is a host directory mounted read-only at model.base_path.
	ModelDir string            `yaml:"model_dir" json:"model_dir"`
	Env      map[string]string `yaml:"env" json:"env"`
	// Args are appended verbatim to the container's command (after the
	// trial's flags); unlike target.flags they are not checked.
	Args    []string `yaml:"args" json:"args"`
	GPUs    string   `yaml:"gpus" json:"gpus"`       // "", "all", a count, or "device=0,1"
	Network string   `yaml:"network" json:"network"` // "" for the engine's default, "host", or a network name
	Pull    string   `yaml:"pull" json:"pull"`
}

// ProcessTarget is the command line of the process runtime.
type ProcessTarget struct {
	// Binary is tensorflow_model_server or a compatible server: a name
	// looked up in PATH, or a path.
	Binary string `yaml:"binary" json:"binary"`
	// Args are passed verbatim before the trial's flags; unlike
	// target.flags they are not checked.
	Args []string          `yaml:"args" json:"args"`
	Env  map[string]string `yaml:"env" json:"env"`
}

// Load is the fixed load every trial is measured under.
type Load struct {
	Mode        string  `yaml:"mode" json:"mode"`
	Concurrency int     `yaml:"concurrency" json:"concurrency"` // closed mode
	Rate        float64 `yaml:"rate" json:"rate"`               // open mode, requests/s
	Arrival     string  `yaml:"arrival" json:"arrival"`         // open mode
	Connections int     `yaml:"connections" json:"connections"`
	Transport   string  `yaml:"transport" json:"transport"`
	// RequestTimeout is each request's deadline.
	RequestTimeout Duration `yaml:"request_timeout" json:"request_timeout"`
	Payload        Payload  `yaml:"payload" json:"payload"`
	Warmup         Warmup   `yaml:"warmup" json:"warmup"`
	// MinDuration and MaxDuration bound a trial's measurement: it stops
	// when its figures are stable, not before MinDuration, never after
	// MaxDuration.
	MinDuration Duration `yaml:"min_duration" json:"min_duration"`
	MaxDuration Duration `yaml:"max_duration" json:"max_duration"`
}

// Payload says what each request carries: generated tensors described by
// Inputs, or, when Inputs is empty, generated from the inputs of the
// model's signature (GetModelMetadata); or a PredictRequest in JSON
// (RequestFile, as protojson writes it); or a TF Serving warmup file
// (WarmupFile), whose PredictLog requests are replayed in turn. At most one
// of Inputs, RequestFile and WarmupFile is given.
type Payload struct {
	// Batch is the size of the batch dimension of each generated request.
	Batch int `yaml:"batch" json:"batch"`
	// Seed seeds the generated values.
	Seed        int64   `yaml:"seed" json:"seed"`
	Inputs      []Input `yaml:"inputs" json:"inputs"`
	RequestFile string  `yaml:"request_file" json:"request_file"`
	WarmupFile  string  `yaml:"warmup_file" json:"warmup_file"`
}

// Input is one generated input tensor, described as saved_model_cli shows
// a signature's input.
type Input struct {
	Name string `yaml:"name" json:"name"`
	// DType is a TensorFlow data type: its enum name (DT_FLOAT), short
	// name (float) or NumPy name (float32).
	DType string `yaml:"dtype" json:"dtype"`
	// Shape is the tensor's shape; -1 as the first dimension is the batch
	// dimension and takes payload.batch.
	Shape []int64 `yaml:"shape" json:"shape"`
}

// Warmup excludes a restarted server's cold start from the measurement: at
// least Requests requests, then, with UntilSettled, until latency settles,
// never longer than MaxDuration.
type Warmup struct {
	Requests     int      `yaml:"requests" json:"requests"`
	UntilSettled bool     `yaml:"until_settled" json:"until_settled"`
	MaxDuration  Duration `yaml:"max_duration" json:"max_duration"`
}

// SLO is the service-level objective a configuration must meet to be
// feasible. Latency also bounds batch_timeout_micros (the SLO/3 rule).
type SLO struct {
	Latency Duration `yaml:"latency" json:"latency"`
	// Quantile is the latency quantile held to Latency (0.99 for P99).
	Quantile float64 `yaml:"quantile" json:"quantile"`
	// ErrorRate is the largest tolerated fraction of failed requests.
	ErrorRate float64 `yaml:"error_rate" json:"error_rate"`
}

// Search configures the strategy that proposes trials.
type Search struct {
	Strategy string `yaml:"strategy" json:"strategy"`
	// Trials is the trial budget of a one-shot run.
	Trials int   `yaml:"trials" json:"trials"`
	Seed   int64 `yaml:"seed" json:"seed"`
	// Parallelism is how many search trials run at once (runtime
	// kubernetes only: each its own pod, node or device).
	Parallelism int `yaml:"parallelism" json:"parallelism"`
	// MaxFailures consecutive failed trials stop the study.
	MaxFailures int `yaml:"max_failures" json:"max_failures"`
	// Settings are the strategy's own settings; the strategy validates
	// them and rejects those it does not know.
	Settings map[string]any `yaml:"settings" json:"settings"`
}

// Confirmation re-measures the best candidates and the baseline on fresh
// restarts before anything is recommended.
type Confirmation struct {
	TopK    int `yaml:"top_k" json:"top_k"`
	Repeats int `yaml:"repeats" json:"repeats"`
	// MaxRepeats bounds the extra repeats taken where Repeats left a
	// verdict open (a split SLO verdict, overlapping intervals of the two
	// best); at most Repeats means none.
	MaxRepeats int `yaml:"max_repeats" json:"max_repeats"`
	// CleanRepeats, when above zero, asks for a stricter verdict on the
	// SLO: no repeat that breaks it is forgiven, and the winner must have
	// met it in at least this many repeats (the leader is re-measured
	// until it has, or breaks it). 0 keeps the default verdict: every one
	// of up to three repeats, all but one in three beyond.
	CleanRepeats int `yaml:"clean_repeats" json:"clean_repeats"`
	// Baseline is the batching.config in production today; "" compares
	// against TF Serving's defaults.
	Baseline string `yaml:"baseline" json:"baseline"`
	// Confidence is the level of the gain's confidence interval.
	Confidence float64 `yaml:"confidence" json:"confidence"`
}

// Export says where the recommendation is written.
type Export struct {
	// Path receives the recommended batching.config.
	Path string `yaml:"path" json:"path"`
	// FlagsPath, when set, receives the matching server flags, one a line.
	FlagsPath string `yaml:"flags_path" json:"flags_path"`
}

// Schedule is how the daemon re-tunes the study. An empty Cron means the
// study is only run on demand.
type Schedule struct {
	// Cron is a five-field cron expression or a descriptor (@daily),
	// evaluated in TimeZone.
	Cron     string `yaml:"cron" json:"cron"`
	TimeZone string `yaml:"time_zone" json:"time_zone"`
	// Trials is the budget of a warm-started scheduled run.
	Trials int `yaml:"trials" json:"trials"`
	// AcceptMargin is the relative gain over the incumbent, with
	// confidence, that a new configuration needs to replace it.
	AcceptMargin float64 `yaml:"accept_margin" json:"accept_margin"`
	// DegradationThreshold is the relative loss of the incumbent's
	// objective since it was accepted that is reported as a degradation.
	DegradationThreshold float64 `yaml:"degradation_threshold" json:"degradation_threshold"`
	// Rollout is a command run (no shell) after an accepted change, with
	// the export path appended as its last argument.
	Rollout        []string `yaml:"rollout" json:"rollout"`
	RolloutTimeout Duration `yaml:"rollout_timeout" json:"rollout_timeout"`
	// Verify is the acceptance soak run after an accepted change, before
	// the rollout (study_verify.go).
	Verify ScheduleVerify `yaml:"verify" json:"verify"`
}

// LoadStudy reads, decodes and validates the study file at path. Unset keys
// take their defaults (DefaultStudy); relative paths in the study are
// resolved against the file's directory. Every problem in the file is
// returned together as StudyProblems, each with its line.
func LoadStudy(path string) (*Study, error) {
	data, err := ReadFile(path, MaxStudyBytes)
	if err != nil {
		return nil, fmt.Errorf("configs: %w", err)
	}
	return ParseStudy(path, data)
}

// ParseStudy is LoadStudy for a document already read; file names it in
// problems and anchors its relative paths.
func ParseStudy(file string, data []byte) (*Study, error) {
	s := DefaultStudy()
	s.File = file
	s.Source = append([]byte(nil), data...)
	d := decoder{lines: map[string]int{}}
	d.document(data, s)
	s.lines = d.lines
	s.resolve(filepath.Dir(file))
	// Every problem is reported at once: the decoding ones, then the
	// value ones, less those about a field that did not decode (it kept
	// its default, and a complaint about that would mislead).
	ps := d.problems
	for _, p := range s.problems() {
		if !coveredBy(p.Field, d.problems) {
			ps = append(ps, p)
		}
	}
	located := s.locate(ps)
	for i, line := range d.at {
		located[i].Line = line
	}
	if err := located.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// coveredBy reports whether field, or a parent of it, has a problem in ps.
func coveredBy(field string, ps Problems) bool {
	for _, p := range ps {
		if p.Field == "" || p.Field == field || strings.HasPrefix(field, p.Field+".") || strings.HasPrefix(field, p.Field+"[") {
			return true
		}
	}
	return false
}

// StudyCheck judges one aspect of a study that configs cannot judge alone,
// such as the space's semantics (search.NewSpace) or the files it names
// (CheckFiles). It returns nil, a Problems whose field paths are relative to
// the document root ("space.max_batch_size.min"), or another error.
type StudyCheck func(*Study) error

// Validate checks every value of s and then runs checks, returning all
// problems together as StudyProblems, each located at its line when s came
// from a file. Errors from checks that are not Problems are returned as
// they are.
func (s *Study) Validate(checks ...StudyCheck) error {
	ps := s.locate(s.problems())
	for _, check := range checks {
		err := check(s)
		if err == nil {
			continue
		}
		var pp Problems
		var sp StudyProblems
		switch {
		case asProblems(err, &pp):
			ps = append(ps, s.locate(pp)...)
		case asStudyProblems(err, &sp):
			ps = append(ps, sp...)
		default:
			return fmt.Errorf("%s: %w", s.displayFile(), err)
		}
	}
	return ps.Err()
}

// Line returns the line field was written on, or that of its nearest
// written parent ("load" for an unwritten "load.rate"), or 0 when s did not
// come from a file.
func (s *Study) Line(field string) int {
	for f := field; ; {
		if n, ok := s.lines[f]; ok {
			return n
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return s.lines[""]
		}
		f = f[:i]
	}
}

// IsSet reports whether field was written in the study file (and was not
// left at its default).
func (s *Study) IsSet(field string) bool {
	_, ok := s.lines[field]
	return ok
}

// Locate turns problems found in s, named by field path, into
// StudyProblems that also name the file and line.
func (s *Study) Locate(ps Problems) StudyProblems { return s.locate(ps) }

func (s *Study) locate(ps Problems) StudyProblems {
	if len(ps) == 0 {
		return nil
	}
	out := make(StudyProblems, 0, len(ps))
	for _, p := range ps {
		out = append(out, StudyProblem{File: s.displayFile(), Line: s.Line(p.Field), Problem: p})
	}
	return out
}

func (s *Study) displayFile() string {
	if s.File == "" {
		return "study"
	}
	return s.File
}

// Hash identifies the study's effective configuration (defaults applied,
// paths resolved): two studies with the same hash run the same experiment.
// It is "sha256:" and 64 hex digits.
func (s *Study) Hash() string {
	// encoding/json writes struct fields in declaration order and map keys
	// sorted, so the encoding is canonical.
	b, err := json.Marshal(s)
	if err != nil {
		// Every field is plain data; Settings came from YAML and holds
		// only JSON-encodable values (maps with string keys are ensured
		// by the decoder).
		panic("configs: study does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// resolve anchors relative paths at dir, the study file's directory, and
// fills the defaults that depend on other values.
func (s *Study) resolve(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		if a, err := filepath.Abs(filepath.Join(dir, p)); err == nil {
			return a
		}
		return filepath.Join(dir, p)
	}
	// A command name without a slash is looked up in PATH, as a shell
	// would; one with a slash is a path.
	cmd := func(p string) string {
		if strings.ContainsRune(p, '/') {
			return abs(p)
		}
		return p
	}
	t := &s.Target
	t.Process.Binary = cmd(t.Process.Binary)
	if t.Runtime == RuntimeProcess {
		t.Model.BasePath = abs(t.Model.BasePath)
	}
	if t.Runtime == RuntimeDocker && t.Model.BasePath == "" && t.Docker.Container == "" && t.Model.Name != "" {
		t.Model.BasePath = "/models/" + t.Model.Name
	}
	if t.Runtime == RuntimeKubernetes && t.Model.BasePath == "" && t.Model.Name != "" {
		t.Model.BasePath = "/models/" + t.Model.Name
	}
	t.Kubernetes.Kubeconfig = abs(t.Kubernetes.Kubeconfig)
	t.Docker.ModelDir = abs(t.Docker.ModelDir)
	s.Load.Payload.RequestFile = abs(s.Load.Payload.RequestFile)
	s.Load.Payload.WarmupFile = abs(s.Load.Payload.WarmupFile)
	s.Confirmation.Baseline = abs(s.Confirmation.Baseline)
	if s.Export.Path == "" && s.Name != "" {
		s.Export.Path = s.Name + ".batching.config"
	}
	s.Export.Path = abs(s.Export.Path)
	s.Export.FlagsPath = abs(s.Export.FlagsPath)
	if len(s.Schedule.Rollout) > 0 {
		s.Schedule.Rollout[0] = cmd(s.Schedule.Rollout[0])
	}
}

// Duration is a time.Duration written as Go writes durations ("80ms",
// "1m30s"). A bare number is refused: its unit would be a guess.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String writes d in the largest unit that divides it ("80ms", "2m",
// "90s"), which ParseDuration reads back.
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 {
		return "0s"
	}
	units := []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if v%u.d == 0 {
			return strconv.FormatInt(int64(v/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(v), 10) + "ns"
}

// ParseDuration reads a duration as Duration.String and time.ParseDuration
// write it; a number without a unit is an error, except 0.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf(`must be a duration like "80ms", got ""`)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf(`must be a duration with a unit, like "80ms" or "2s", got %s`, s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`must be a duration like "80ms" or "1m30s", got %q`, s)
	}
	return Duration(v), nil
}

// MarshalText writes d as String does; YAML and JSON use it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads d as ParseDuration does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
