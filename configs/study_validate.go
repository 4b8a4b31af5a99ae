package configs

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batchtune/batchtune/objective"
	"github.com/batchtune/batchtune/tfserving"
)

var (
	studyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	gpusSpec  = regexp.MustCompile(`^(all|[1-9][0-9]*|device=[0-9A-Za-z-]+(,[0-9A-Za-z-]+)*)$`)
)

// problems checks every value of s, independently of where it came from.
// Keys given for a mode or runtime they do not apply to are reported: they
// would otherwise be ignored, and the user meant something by them.
func (s *Study) problems() Problems {
	chk := &studyCheck{s: s}
	chk.name()
	chk.target()
	closed, open := chk.load()
	chk.sloObjective(closed, open)
	chk.space()
	chk.search()
	chk.confirmation()
	chk.export()
	chk.schedule()
	s.checkLimits(&chk.ps)
	return chk.ps
}

// studyCheck collects the problems of one study, section by section; its
// helpers each check one value.
type studyCheck struct {
	s  *Study
	ps Problems
}

func (chk *studyCheck) oneOf(field, got string, allowed ...string) bool {
	if !slices.Contains(allowed, got) {
		chk.ps.Add(field, "must be one of %s, got %q", strings.Join(allowed, ", "), got)
		return false
	}
	return true
}

func (chk *studyCheck) atLeast(field string, got, min int) {
	if got < min {
		chk.ps.Add(field, "must be >= %d, got %d", min, got)
	}
}

func (chk *studyCheck) positive(field string, d Duration) {
	if d <= 0 {
		chk.ps.Add(field, "must be a positive duration, got %s", d)
	}
}

func (chk *studyCheck) fraction(field string, got float64, lowOpen, highOpen bool) {
	bad := math.IsNaN(got) || got < 0 || got > 1 || (lowOpen && got == 0) || (highOpen && got == 1)
	if bad {
		lo, hi := "[0", "1]"
		if lowOpen {
			lo = "(0"
		}
		if highOpen {
			hi = "1)"
		}
		chk.ps.Add(field, "must be in %s, %s, got %v", lo, hi, got)
	}
}

func (chk *studyCheck) notSetUnless(field, cond string, applies bool) {
	if !applies && chk.s.IsSet(field) && !chk.s.isDefault(field) {
		chk.ps.Add(field, "applies only when %s", cond)
	}
}

// name checks the study's name.
func (chk *studyCheck) name() {
	s := chk.s
	switch {
	case s.Name == "":
		chk.ps.Add("name", "is required")
	case !studyName.MatchString(s.Name):
		chk.ps.Add("name", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got %q", s.Name)
	}
}

// target checks target: runtime, model, ports, flags and the runtime's
// own section.
func (chk *studyCheck) target() {
	s := chk.s
	t := s.Target
	chk.oneOf("target.runtime", t.Runtime, RuntimeDocker, RuntimeProcess, RuntimeKubernetes)
	inPlace := t.Runtime == RuntimeDocker && t.Docker.Container != "" && t.Docker.Image == ""
	switch {
	case t.Model.Name == "":
		chk.ps.Add("target.model.name", "is required")
	case strings.ContainsAny(t.Model.Name, "/ \t"):
		chk.ps.Add("target.model.name", "must not contain '/' or spaces, got %q", t.Model.Name)
	}
	if t.Runtime == RuntimeProcess && t.Model.BasePath == "" {
		chk.ps.Add("target.model.base_path", "is required with runtime process")
	}
	if t.Model.Signature == "" {
		chk.ps.Add("target.model.signature", "must not be empty (TF's default is serving_default)")
	}
	for _, p := range []struct {
		field string
		port  int
	}{{"target.ports.grpc", t.Ports.GRPC}, {"target.ports.rest", t.Ports.REST}} {
		if p.port < 0 || p.port > 65535 {
			chk.ps.Add(p.field, "must be a port in 1..65535, or 0 for a free one, got %d", p.port)
		}
	}
	if t.Ports.GRPC == t.Ports.REST && t.Ports.GRPC != 0 {
		chk.ps.Add("target.ports.rest", "must differ from target.ports.grpc (%d): TF Serving refuses to share them", t.Ports.GRPC)
	}
	s.checkFlags(&chk.ps)
	chk.positive("target.start_timeout", t.StartTimeout)

	d := t.Docker
	for _, f := range []string{"image", "container", "model_dir", "env", "args", "gpus", "network", "pull"} {
		chk.notSetUnless("target.docker."+f, "target.runtime is docker", t.Runtime == RuntimeDocker)
	}
	for _, f := range []string{"binary", "args", "env"} {
		chk.notSetUnless("target.process."+f, "target.runtime is process", t.Runtime == RuntimeProcess)
	}
	if t.Runtime == RuntimeDocker {
		switch {
		case d.Image == "" && d.Container == "":
			chk.ps.Add("target.docker", "needs image (a trial container per trial) or container (tune an existing one in place)")
		case d.Image != "" && d.Container != "":
			chk.ps.Add("target.docker.container", "cannot be combined with target.docker.image: give the image to create trial containers, or the container to tune in place")
		}
		if inPlace {
			chk.notSetUnless("target.docker.model_dir", "target.docker.image is set (an existing container keeps its mounts)", false)
			chk.notSetUnless("target.model.base_path", "target.docker.image is set (an existing container keeps its model path)", false)
		}
		if strings.ContainsAny(d.Image, " \t") {
			chk.ps.Add("target.docker.image", "must be an image reference without spaces, got %q", d.Image)
		}
		if d.GPUs != "" && !gpusSpec.MatchString(d.GPUs) {
			chk.ps.Add("target.docker.gpus", `must be "all", a count or "device=0,1", got %q`, d.GPUs)
		}
		chk.oneOf("target.docker.pull", d.Pull, PullMissing, PullAlways, PullNever)
		if t.Model.BasePath != "" && !strings.HasPrefix(t.Model.BasePath, "/") {
			chk.ps.Add("target.model.base_path", "must be an absolute path inside the container with runtime docker, got %q", t.Model.BasePath)
		}
		checkEnv(&chk.ps, "target.docker.env", d.Env)
	}
	chk.kubernetes()
	if t.Runtime == RuntimeProcess {
		if t.Process.Binary == "" {
			chk.ps.Add("target.process.binary", "is required with runtime process")
		}
		checkEnv(&chk.ps, "target.process.env", t.Process.Env)
	}
}

// load checks load and reports its shape (closed or open loop; neither
// when load.mode is invalid).
func (chk *studyCheck) load() (closed, open bool) {
	s := chk.s
	l := s.Load
	chk.oneOf("load.mode", l.Mode, LoadClosed, LoadOpen)
	closed, open = l.Mode == LoadClosed, l.Mode == LoadOpen
	chk.notSetUnless("load.concurrency", "load.mode is closed", closed)
	chk.notSetUnless("load.rate", "load.mode is open", open)
	chk.notSetUnless("load.arrival", "load.mode is open", open)
	if closed {
		chk.atLeast("load.concurrency", l.Concurrency, 1)
	}
	if open {
		if !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
			chk.ps.Add("load.rate", "must be > 0 requests/s with load.mode open, got %v", l.Rate)
		}
		chk.oneOf("load.arrival", l.Arrival, ArrivalConstant, ArrivalPoisson)
	}
	chk.atLeast("load.connections", l.Connections, 1)
	chk.oneOf("load.transport", l.Transport, TransportGRPC, TransportREST)
	chk.positive("load.request_timeout", l.RequestTimeout)
	s.checkPayload(&chk.ps)
	chk.atLeast("load.warmup.requests", l.Warmup.Requests, 0)
	chk.positive("load.warmup.max_duration", l.Warmup.MaxDuration)
	chk.positive("load.min_duration", l.MinDuration)
	chk.positive("load.max_duration", l.MaxDuration)
	if l.MaxDuration > 0 && l.MaxDuration < l.MinDuration {
		chk.ps.Add("load.max_duration", "must be >= load.min_duration (%s), got %s", l.MinDuration, l.MaxDuration)
	}
	return closed, open
}

// sloObjective checks slo, the request timeout against it, and objective
// against the load's shape.
func (chk *studyCheck) sloObjective(closed, open bool) {
	s := chk.s
	l := s.Load
	switch {
	case s.SLO.Latency == 0:
		chk.ps.Add("slo.latency", `is required: the latency bound of slo.quantile, e.g. "80ms"`)
	default:
		chk.positive("slo.latency", s.SLO.Latency)
	}
	chk.fraction("slo.quantile", s.SLO.Quantile, true, true)
	chk.fraction("slo.error_rate", s.SLO.ErrorRate, false, true)
	if s.SLO.Latency > 0 && l.RequestTimeout > 0 && l.RequestTimeout <= s.SLO.Latency {
		chk.ps.Add("load.request_timeout", "must exceed slo.latency (%s), got %s: requests cut at the deadline would hide the latency that breaks the SLO", s.SLO.Latency, l.RequestTimeout)
	}
	// The objectives, and the load each needs, are package objective's.
	if chk.oneOf("objective", string(s.Objective), objective.Names()...) && (open || closed) {
		if k, err := objective.Parse(string(s.Objective)); err == nil {
			if why := k.CheckLoad(open); why != "" {
				chk.ps.Add("objective", "%s", why)
			}
		}
	}
}

// space checks the space's syntax only; search.NewSpace judges what it
// means.
func (chk *studyCheck) space() {
	s := chk.s
	if len(s.Space) == 0 {
		chk.ps.Add("space", "must declare at least one parameter")
	}
	for i, p := range s.Space {
		if p.Name == "" {
			chk.ps.Add("space["+strconv.Itoa(i)+"]", "has no parameter name")
		}
	}
}

// search checks search.
func (chk *studyCheck) search() {
	s := chk.s
	checkStrategy(&chk.ps, s.Search.Strategy) // the names package search declares
	chk.atLeast("search.trials", s.Search.Trials, 1)
	chk.atLeast("search.parallelism", s.Search.Parallelism, 1)
	if s.Search.Parallelism > 1 && s.Target.Runtime != RuntimeKubernetes {
		chk.ps.Add("search.parallelism", "%d trials at once need target.runtime kubernetes (a pod each, on its own node or device); with runtime %s they would share this host's cores and distort each other's measurements, so it must be 1", s.Search.Parallelism, s.Target.Runtime)
	}
	chk.atLeast("search.max_failures", s.Search.MaxFailures, 1)
}

// confirmation checks confirmation.
func (chk *studyCheck) confirmation() {
	chk.ps = append(chk.ps, chk.s.Confirmation.Problems()...)
}

// Problems lists every problem with c, with field paths under
// confirmation (a study's check, and searchbench -confirmation's).
func (c Confirmation) Problems() Problems {
	chk := &studyCheck{}
	chk.atLeast("confirmation.top_k", c.TopK, 1)
	chk.atLeast("confirmation.repeats", c.Repeats, 2)
	if m := c.MaxRepeats; m < 0 || m > 20 {
		chk.ps.Add("confirmation.max_repeats", "must be between 0 and 20 (at most repeats means no extra repeats), got %d", m)
	}
	if n := c.CleanRepeats; n < 0 || n > 20 {
		chk.ps.Add("confirmation.clean_repeats", "must be between 0 and 20 (0 keeps the default verdict on the SLO), got %d", n)
	}
	if v := c.Confidence; !(v >= 0.5 && v < 1) {
		chk.ps.Add("confirmation.confidence", "must be in [0.5, 1), got %v", v)
	}
	return chk.ps
}

// export checks export.
func (chk *studyCheck) export() {
	s := chk.s
	if s.Export.Path == "" && s.Name != "" {
		chk.ps.Add("export.path", "must not be empty") // its default derives from the name
	}
	if s.Export.FlagsPath != "" && s.Export.FlagsPath == s.Export.Path {
		chk.ps.Add("export.flags_path", "must differ from export.path")
	}
}

// schedule checks schedule.
func (chk *studyCheck) schedule() {
	s := chk.s
	sc := s.Schedule
	if sc.Cron != "" {
		if strings.HasPrefix(sc.Cron, "TZ=") || strings.HasPrefix(sc.Cron, "CRON_TZ=") {
			chk.ps.Add("schedule.cron", "gives its time zone in schedule.time_zone, not in the expression")
		} else if _, err := cron.ParseStandard(sc.Cron); err != nil {
			chk.ps.Add("schedule.cron", "is not a cron expression (minute hour day-of-month month day-of-week, or @daily...): %v", err)
		}
	}
	if sc.TimeZone == "" {
		chk.ps.Add("schedule.time_zone", `must name a time zone ("UTC", "Local", "Europe/Berlin")`)
	} else if _, err := time.LoadLocation(sc.TimeZone); err != nil {
		chk.ps.Add("schedule.time_zone", "is not a known time zone: %q", sc.TimeZone)
	}
	chk.atLeast("schedule.trials", sc.Trials, 1)
	chk.fraction("schedule.accept_margin", sc.AcceptMargin, false, true)
	chk.fraction("schedule.degradation_threshold", sc.DegradationThreshold, true, true)
	if len(sc.Rollout) > 0 && sc.Rollout[0] == "" {
		chk.ps.Add("schedule.rollout[0]", "must name the command to run")
	}
	chk.positive("schedule.rollout_timeout", sc.RolloutTimeout)
	chk.scheduleVerify()
}

func (s *Study) checkPayload(ps *Problems) {
	p := s.Load.Payload
	var sources []string
	if len(p.Inputs) > 0 {
		sources = append(sources, "inputs")
	}
	if p.RequestFile != "" {
		sources = append(sources, "request_file")
	}
	if p.WarmupFile != "" {
		sources = append(sources, "warmup_file")
	}
	if len(sources) > 1 {
		ps.Add("load.payload", "has %s: give at most one request source", strings.Join(sources, " and "))
	}
	generated := len(sources) == 0 || sources[0] == "inputs"
	if !generated {
		for _, f := range []string{"batch", "seed"} {
			if s.IsSet("load.payload."+f) && !s.isDefault("load.payload."+f) {
				ps.Add("load.payload."+f, "applies only to generated requests (inputs given or taken from the model's signature), not to %s", sources[0])
			}
		}
	}
	if p.Batch < 1 {
		ps.Add("load.payload.batch", "must be >= 1, got %d", p.Batch)
	}
	names := map[string]int{}
	for i, in := range p.Inputs {
		f := "load.payload.inputs[" + strconv.Itoa(i) + "]"
		if in.Name == "" {
			ps.Add(f+".name", "is required")
		} else if prev, dup := names[in.Name]; dup {
			ps.Add(f+".name", "%q is already the name of inputs[%d]", in.Name, prev)
		} else {
			names[in.Name] = i
		}
		if !IsDType(in.DType) {
			ps.Add(f+".dtype", "is not a TensorFlow data type: %q (write DT_FLOAT, float or float32 style)", in.DType)
		}
		for j, dim := range in.Shape {
			switch {
			case dim == -1 && j == 0:
			case dim == -1:
				ps.Add(f+".shape["+strconv.Itoa(j)+"]", "-1 is only allowed as the batch dimension (the first); give the size")
			case dim < 1:
				ps.Add(f+".shape["+strconv.Itoa(j)+"]", "must be >= 1 (or -1 first for the batch dimension), got %d", dim)
			}
		}
		if p.Batch > 1 && (len(in.Shape) == 0 || in.Shape[0] != -1) {
			ps.Add(f+".shape", "has no batch dimension (-1 first), but load.payload.batch is %d", p.Batch)
		}
	}
}

// dtypeNames are the names of TF data types a payload may use: the enum
// names, lower-cased; the short names; the NumPy names.
var dtypeNames = map[string]bool{
	"bool": true, "string": true, "bytes": true, "half": true, "float": true, "double": true,
	"float16": true, "float32": true, "float64": true, "bfloat16": true, "complex64": true,
	"int8": true, "int16": true, "int32": true, "int64": true,
	"uint8": true, "uint16": true, "uint32": true, "uint64": true,
}

// IsDType reports whether s names a TensorFlow data type (DT_FLOAT, float,
// float32; case-insensitive).
func IsDType(s string) bool {
	l := strings.ToLower(strings.TrimSpace(s))
	if n, ok := strings.CutPrefix(l, "dt_"); ok {
		v, known := tfserving.DataType_value[strings.ToUpper(l)]
		return known && v != 0 && n != ""
	}
	return dtypeNames[l]
}

// isDefault reports whether the value at field (a path of keys, no list
// indexes) equals its default. A study that writes out every key, as an
// encoded Study does, sets keys of the other mode or runtime to their
// defaults; only other values are reported.
func (s *Study) isDefault(field string) bool {
	got, ok1 := fieldByPath(reflect.ValueOf(s).Elem(), field)
	def, ok2 := fieldByPath(reflect.ValueOf(DefaultStudy()).Elem(), field)
	if !ok1 || !ok2 {
		return false
	}
	if k := got.Kind(); (k == reflect.Slice || k == reflect.Map) && got.Len() == 0 && def.Len() == 0 {
		return true // nil and empty lists and maps alike
	}
	return reflect.DeepEqual(got.Interface(), def.Interface())
}

func checkEnv(ps *Problems, field string, env map[string]string) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !envName.MatchString(k) {
			ps.Add(field+"."+k, "is not a valid environment variable name")
		}
	}
}

// CheckFiles is a StudyCheck for the files a study names: the server binary
// and model directory exist, a request file is a valid JSON PredictRequest,
// a warmup file is readable, a baseline is a valid batching.config, the
// export directory exists, and the rollout command can be found. It checks
// the machine it runs on, so the daemon and `batchtune validate` use it;
// LoadStudy does not.
func CheckFiles(s *Study) error {
	var ps Problems
	t := s.Target
	if t.Runtime == RuntimeProcess {
		if t.Process.Binary != "" {
			if _, err := exec.LookPath(t.Process.Binary); err != nil {
				ps.Add("target.process.binary", "cannot be run: %s", pathErr(err))
			}
		}
		checkDir(&ps, "target.model.base_path", t.Model.BasePath)
	}
	if t.Runtime == RuntimeDocker {
		checkDir(&ps, "target.docker.model_dir", t.Docker.ModelDir)
	}
	if f := s.Load.Payload.RequestFile; f != "" {
		if data, err := ReadFile(f, MaxRequestBytes); err != nil {
			ps.Add("load.payload.request_file", "%s", pathErr(err))
		} else if err := protojson.Unmarshal(data, &tfserving.PredictRequest{}); err != nil {
			ps.Add("load.payload.request_file", "%s is not a JSON PredictRequest: %v", f, err)
		}
	}
	if f := s.Load.Payload.WarmupFile; f != "" {
		if st, err := os.Stat(f); err != nil {
			ps.Add("load.payload.warmup_file", "%s", pathErr(err))
		} else if !st.Mode().IsRegular() || st.Size() > MaxWarmupBytes {
			ps.Add("load.payload.warmup_file", "%s is not a regular file of at most %d bytes", f, int64(MaxWarmupBytes))
		} else if st.IsDir() || st.Size() == 0 {
			ps.Add("load.payload.warmup_file", "%s is not a warmup file (a directory or empty)", f)
		}
	}
	if f := s.Confirmation.Baseline; f != "" {
		if _, err := LoadBatching(f); err != nil {
			ps.Add("confirmation.baseline", "%s", strings.TrimPrefix(err.Error(), "configs: "))
		}
	}
	for _, e := range []struct{ field, path string }{{"export.path", s.Export.Path}, {"export.flags_path", s.Export.FlagsPath}} {
		if e.path != "" {
			checkDir(&ps, e.field, filepath.Dir(e.path))
		}
	}
	if len(s.Schedule.Rollout) > 0 && s.Schedule.Rollout[0] != "" {
		if _, err := exec.LookPath(s.Schedule.Rollout[0]); err != nil {
			ps.Add("schedule.rollout[0]", "cannot be run: %s", pathErr(err))
		}
	}
	return ps.Err()
}

func checkDir(ps *Problems, field, dir string) {
	if dir == "" {
		return
	}
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		ps.Add(field, "%s", pathErr(err))
	case !st.IsDir():
		ps.Add(field, "%s is not a directory", dir)
	}
}

// pathErr shortens os errors to "PATH: reason".
func pathErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Name + ": " + ee.Err.Error()
	}
	return err.Error()
}
