package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// minimal is a valid study with only the keys that have no default, on the
// process runtime. Tests append to it or replace lines of it.
const minimal = `name: resnet-cpu
target:
  runtime: process
  model: {name: resnet, base_path: models/resnet}
  process: {binary: ./bin/server}
slo:
  latency: 80ms
`

func TestParseStudyMinimal(t *testing.T) {
	s, err := ParseStudy("/etc/studies/resnet.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultStudy()
	want.Name = "resnet-cpu"
	want.Target.Runtime = RuntimeProcess
	want.Target.Model.Name = "resnet"
	want.Target.Model.BasePath = "/etc/studies/models/resnet" // relative to the file
	want.Target.Process.Binary = "/etc/studies/bin/server"
	want.SLO.Latency = Duration(80 * time.Millisecond)
	want.Export.Path = "/etc/studies/resnet-cpu.batching.config" // derived default
	want.File = "/etc/studies/resnet.yaml"
	want.Source = []byte(minimal)
	if diff := cmp.Diff(want, s, cmpopts.IgnoreUnexported(Study{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Lines of written keys, and of the nearest written parent otherwise.
	for field, line := range map[string]int{
		"name": 1, "target.model.name": 4, "slo.latency": 7,
		"target.ports.grpc": 2, // unwritten: its parent target is on line 2
		"load.rate":         1, // no written parent: the document
	} {
		if got := s.Line(field); got != line {
			t.Errorf("Line(%q) = %d, want %d", field, got, line)
		}
	}
	if !s.IsSet("slo.latency") || s.IsSet("load.rate") {
		t.Errorf("IsSet: slo.latency %v (want true), load.rate %v (want false)", s.IsSet("slo.latency"), s.IsSet("load.rate"))
	}
}

// TestParseStudyProblems feeds documents with mistakes and checks that
// every mistake is reported, at its line, with its field path.
func TestParseStudyProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // "line field: message fragment"
	}{
		// The example of the brief: a value out of range, at its line.
		{"concurrency zero", minimal + "load:\n  concurrency: 0\n",
			[]string{"9 load.concurrency: must be >= 1, got 0"}},
		// Unknown keys are errors, with the closest known key proposed, and
		// decoding goes on: the second mistake is reported too.
		{"unknown keys", minimal + "load:\n  concurrancy: 4\n  tranport: rest\n",
			[]string{`9 load.concurrancy: unknown key (did you mean "concurrency"?)`, `10 load.tranport: unknown key (did you mean "transport"?)`}},
		// An unknown top-level key with nothing close lists the known ones.
		{"unknown top-level key", minimal + "zzzzzz: 1\n",
			[]string{"8 zzzzzz: unknown key (known keys: confirmation, export, load, name, objective, schedule, search, slo, space, target)"}},
		// A duration without a unit is refused, not guessed.
		{"bare number duration", strings.Replace(minimal, "80ms", "80", 1),
			[]string{`7 slo.latency: must be a duration with a unit, like "80ms" or "2s", got 80`}},
		// A malformed duration.
		{"bad duration", strings.Replace(minimal, "80ms", "eighty", 1),
			[]string{`7 slo.latency: must be a duration like "80ms" or "1m30s", got "eighty"`}},
		// Wrong types name what was expected and what was found.
		{"wrong types", minimal + "load:\n  concurrency: many\n  warmup: [1]\n  payload: {inputs: {}}\n",
			[]string{`9 load.concurrency: must be an integer, got "many"`, "10 load.warmup: must be a mapping of keys to values, got a list", "11 load.payload.inputs: must be a list, got a mapping"}},
		// A key given twice is reported at its second occurrence.
		{"duplicate key", minimal + "objective: max_throughput\nobjective: min_latency\n",
			[]string{"9 objective: is given twice (first on line 8)"}},
		// A key with no value is not silently the zero value.
		{"null scalar", minimal + "load:\n  connections:\n",
			[]string{"9 load.connections: has no value; remove the key to use the default"}},
		// Required keys.
		{"required", "target:\n  runtime: docker\n  docker: {image: tensorflow/serving}\n",
			[]string{"1 name: is required", "1 target.model.name: is required", "1 slo.latency: is required"}},
		// The open mode needs a rate; keys of the other mode are refused.
		{"open without rate", minimal + "objective: min_latency\nload:\n  mode: open\n  concurrency: 8\n",
			[]string{"9 load.rate: must be > 0 requests/s with load.mode open, got 0", "11 load.concurrency: applies only when load.mode is closed"}},
		// The objective must match the load mode.
		{"objective vs mode", minimal + "objective: min_latency\n",
			[]string{"8 objective: min_latency needs an open-loop load"}},
		// Enumerations list the allowed values.
		{"enums", minimal + "load: {transport: http, mode: closed}\nsearch: {strategy: anneal}\n",
			[]string{`8 load.transport: must be one of grpc, rest, got "http"`, `9 search.strategy: must be one of grid, random, hillclimb, bayes, got "anneal"`}},
		// Flags: unknown names, flags batchtune owns, flags the space tunes.
		{"flags", strings.Replace(minimal, "  process:", "  flags: [--rest_api_num_thread=8, --enable_batching=true, --num_batch_threads=4, --grpc_max_threads=8]\n  process:", 1) +
			"space:\n  grpc_max_threads: {values: [4, 8]}\n",
			[]string{
				"5 target.flags[0]: --rest_api_num_thread is not a tensorflow_model_server flag (did you mean --rest_api_num_threads?)",
				"5 target.flags[1]: --enable_batching is set by batchtune",
				"5 target.flags[2]: --num_batch_threads is not a tensorflow_model_server flag",
				"5 target.flags[3]: --grpc_max_threads is tuned by space.grpc_max_threads",
			}},
		// TF Serving refuses session parallelism with intra/inter-op.
		{"session parallelism", strings.Replace(minimal, "  process:", "  flags: [--tensorflow_session_parallelism=4]\n  process:", 1) +
			"space:\n  tensorflow_intra_op_parallelism: {values: [1, 2]}\n",
			[]string{"5 target.flags: --tensorflow_session_parallelism=4 cannot be combined with --tensorflow_intra_op_parallelism"}},
		// Sections of the other runtime are refused, not ignored.
		{"other runtime's section", strings.Replace(minimal, "  process:", "  docker: {image: x}\n  process:", 1),
			[]string{"5 target.docker.image: applies only when target.runtime is docker"}},
		// docker needs an image or a container, not both.
		{"docker image and container", strings.Replace(strings.Replace(minimal, "runtime: process", "runtime: docker", 1), "  process: {binary: ./bin/server}\n", "  docker: {image: a, container: b}\n", 1),
			[]string{"4 target.model.base_path: must be an absolute path inside the container", "5 target.docker.container: cannot be combined with target.docker.image"}},
		// Payload: one source at most; shapes as saved_model_cli writes them.
		{"payload", minimal + "load:\n  payload:\n    request_file: r.json\n    batch: 4\n    inputs:\n      - {name: x, dtype: float32, shape: [224, -1]}\n      - {name: x, dtype: floatt, shape: [-1, 0]}\n",
			[]string{
				"9 load.payload: has inputs and request_file: give at most one request source",
				"13 load.payload.inputs[0].shape[1]: -1 is only allowed as the batch dimension",
				"13 load.payload.inputs[0].shape: has no batch dimension (-1 first), but load.payload.batch is 4",
				`14 load.payload.inputs[1].name: "x" is already the name of inputs[0]`,
				`14 load.payload.inputs[1].dtype: is not a TensorFlow data type: "floatt"`,
				"14 load.payload.inputs[1].shape[1]: must be >= 1",
			}},
		// The request deadline must leave room above the SLO.
		{"request timeout", minimal + "load: {request_timeout: 50ms}\n",
			[]string{"8 load.request_timeout: must exceed slo.latency (80ms), got 50ms"}},
		// Fractions and the reserved parallelism.
		{"ranges", minimal + "search: {parallelism: 2}\nconfirmation: {repeats: 1, confidence: 1, clean_repeats: -1}\n",
			[]string{"8 search.parallelism: 2 trials at once need target.runtime kubernetes", "9 confirmation.repeats: must be >= 2, got 1", "9 confirmation.clean_repeats: must be between 0 and 20", "9 confirmation.confidence: must be in [0.5, 1), got 1"}},
		// The schedule: a cron expression, a time zone, a rollout command.
		{"schedule", minimal + "schedule:\n  cron: \"CRON_TZ=UTC 0 3 * * *\"\n  time_zone: Nowhere/City\n  rollout: [\"\"]\n",
			[]string{"9 schedule.cron: gives its time zone in schedule.time_zone", `10 schedule.time_zone: is not a known time zone: "Nowhere/City"`, "11 schedule.rollout[0]: must name the command to run"}},
		// Space syntax: unknown keys inside a parameter, a parameter twice.
		{"space syntax", minimal + "space:\n  max_batch_size: {values: [1, 2], scael: log}\n  max_batch_size: {values: [4]}\n",
			[]string{`9 space.max_batch_size.scael: unknown key (did you mean "scale"?)`, "10 space.max_batch_size: is declared twice (first on line 9)"}},
		// Strategy settings are free-form but must stay encodable.
		{"infinite setting", minimal + "search:\n  settings: {xi: .inf, list: [1, .nan]}\n",
			[]string{"9 search.settings.xi: must be a finite number, got .inf", "9 search.settings.list[1]: must be a finite number, got .nan"}},
		// An empty document says what it needs.
		{"empty", "", []string{"1 : the study is empty"}},
		// YAML syntax errors keep their line.
		{"syntax", minimal + "load:\n  mode: closed\n  rate: [1\n", []string{"9 : YAML syntax: did not find expected ',' or ']'"}},
		// One document per file.
		{"two documents", minimal + "---\nname: other\n", []string{"8 : a study file holds one YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStudy("study.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidStudy) {
				t.Errorf("errors.Is(err, ErrInvalidStudy) = false for %v", err)
			}
			var ps StudyProblems
			if !errors.As(err, &ps) {
				t.Fatalf("error is not StudyProblems: %v", err)
			}
			var got []string
			for _, p := range ps {
				if p.File != "study.yaml" {
					t.Errorf("problem names file %q", p.File)
				}
				got = append(got, fmt.Sprintf("%d %s: %s", p.Line, p.Field, p.Msg))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("problem %d:\n got %s\nwant %s...", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestStudyProblemString(t *testing.T) {
	ps := StudyProblems{
		{File: "study.yaml", Line: 14, Problem: Problem{Field: "load.concurrency", Msg: "must be >= 1, got 0"}},
		{File: "study.yaml", Problem: Problem{Field: "name", Msg: "is required"}},
	}
	want := "2 problems:\n  study.yaml:14: load.concurrency: must be >= 1, got 0\n  study.yaml: name: is required"
	if got := ps.Error(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestValidateChecks runs extra checks the way validate runs the search
// engine's space check: Problems come back located, other errors as they
// are.
func TestValidateChecks(t *testing.T) {
	s, err := ParseStudy("study.yaml", []byte(minimal+"space:\n  max_batch_size: {values: [0, 8]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	spaceCheck := func(s *Study) error {
		var ps Problems
		ps.Add("space.max_batch_size.values[0]", "must be >= 1, got 0")
		return ps
	}
	err = s.Validate(spaceCheck)
	want := "study.yaml:9: space.max_batch_size.values[0]: must be >= 1, got 0"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	boom := errors.New("engine down")
	if err := s.Validate(func(*Study) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("got %v, want it to wrap %v", err, boom)
	}
}

// TestStudyRoundTrip encodes valid studies with the ordinary YAML encoder
// and decodes them back unchanged.
func TestStudyRoundTrip(t *testing.T) {
	docs := []string{
		minimal,
		minimal + "objective: min_latency\nload: {mode: open, rate: 250.5, arrival: poisson}\nsearch: {settings: {xi: 0.01, kernel: matern52, starts: [1, 2]}}\n",
		minimal + "load:\n  payload:\n    batch: 8\n    inputs: [{name: image, dtype: DT_FLOAT, shape: [-1, 224, 224, 3]}]\nschedule: {cron: \"@daily\", rollout: [kubectl, rollout, restart]}\n",
	}
	for i, doc := range docs {
		s, err := ParseStudy("/s/study.yaml", []byte(doc))
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseStudy("/s/study.yaml", b)
		if err != nil {
			t.Fatalf("doc %d re-encoded does not parse: %v\n%s", i, err, b)
		}
		if diff := cmp.Diff(s, back, cmpopts.IgnoreUnexported(Study{}), cmpopts.IgnoreFields(Study{}, "Source")); diff != "" {
			t.Errorf("doc %d round trip (-want +got):\n%s", i, diff)
		}
		if s.Hash() != back.Hash() {
			t.Errorf("doc %d: hash changed in a round trip", i)
		}
	}
}

func TestStudyHash(t *testing.T) {
	a, err := ParseStudy("/s/a.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	// Comments and layout do not change what runs.
	b, err := ParseStudy("/s/a.yaml", []byte("# a comment\n"+minimal+"load: {mode: closed}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseStudy("/s/a.yaml", []byte(minimal+"load: {concurrency: 17}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() != b.Hash() {
		t.Errorf("same effective study, different hashes")
	}
	if a.Hash() == c.Hash() {
		t.Errorf("different concurrency, same hash")
	}
	if !strings.HasPrefix(a.Hash(), "sha256:") || len(a.Hash()) != len("sha256:")+64 {
		t.Errorf("hash %q is not sha256:<64 hex>", a.Hash())
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		str  string
		err  bool
	}{
		{"80ms", 80 * time.Millisecond, "80ms", false},      // the usual
		{"1m30s", 90 * time.Second, "90s", false},           // written in its largest exact unit
		{"2h", 2 * time.Hour, "2h", false},                  // hours
		{"1.5ms", 1500 * time.Microsecond, "1500us", false}, // fractions
		{"0", 0, "0s", false},                               // zero needs no unit
		{"80", 0, "", true},                                 // a unit is required
		{"-", 0, "", true},                                  // garbage
		{"", 0, "", true},                                   // empty
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParseDuration(%q) error %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if d.D() != tt.want || d.String() != tt.str {
			t.Errorf("ParseDuration(%q) = %v (%s), want %v (%s)", tt.in, d.D(), d, tt.want, tt.str)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("%s does not read back: %v, %v", d, back, err)
		}
	}
}

// TestCheckFiles checks the files a study names against a real directory.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("server", "#!/bin/sh\n", 0o755)
	write("req.json", `{"inputs": {"x": {"dtype": "DT_FLOAT", "floatVal": [1]}}}`, 0o644)
	write("bad.json", `{"inputz": 1}`, 0o644)
	write("prod.config", "max_batch_size { value: 0 }\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := `name: s
target:
  runtime: process
  model: {name: m, base_path: model}
  process: {binary: ./server}
load: {payload: {request_file: req.json}}
slo: {latency: 50ms}
`
	path := filepath.Join(dir, "good.yaml")
	write("good.yaml", good, 0o644)
	s, err := LoadStudy(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(CheckFiles); err != nil {
		t.Errorf("good study: %v", err)
	}

	bad := `name: s
target:
  runtime: process
  model: {name: m, base_path: nomodel}
  process: {binary: ./missing}
load: {payload: {request_file: bad.json}}
slo: {latency: 50ms}
confirmation: {baseline: prod.config}
export: {path: nodir/out.config}
schedule: {rollout: [no-such-command-xyz]}
`
	write("bad.yaml", bad, 0o644)
	s, err = LoadStudy(filepath.Join(dir, "bad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(CheckFiles)
	var ps StudyProblems
	if !errors.As(err, &ps) {
		t.Fatalf("got %v, want StudyProblems", err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%d %s", p.Line, p.Field))
	}
	want := []string{"4 target.model.base_path", "5 target.process.binary", "6 load.payload.request_file", "8 confirmation.baseline", "9 export.path", "10 schedule.rollout[0]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s\n%v", diff, err)
	}
	if !strings.Contains(err.Error(), "max_batch_size: must be positive, got 0") {
		t.Errorf("baseline problem does not say what is wrong in the file: %v", err)
	}
}

// TestExamples loads every example study. Each must be valid except
// reference.yaml, which shows the defaults and so lacks exactly the keys
// that have none.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d examples, want the reference and three studies: %v", len(files), files)
	}
	for _, f := range files {
		_, err := LoadStudy(f)
		if filepath.Base(f) == "reference.yaml" {
			var ps StudyProblems
			if !errors.As(err, &ps) {
				t.Fatalf("reference.yaml: got %v, want the problems of its empty required keys", err)
			}
			var fields []string
			for _, p := range ps {
				fields = append(fields, p.Field)
			}
			want := []string{"name", "target.model.name", "target.docker", "slo.latency"}
			if diff := cmp.Diff(want, fields); diff != "" {
				t.Errorf("reference.yaml problems (-want +got):\n%s\n%v", diff, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// FuzzParseStudy feeds arbitrary documents: ParseStudy never panics, and a
// study it accepts validates, hashes and survives a YAML round trip.
func FuzzParseStudy(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "load: {mode: open, rate: 10}\nobjective: min_latency\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("a: &x {b: *x}\n"))
	if b, err := os.ReadFile("examples/reference.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := ParseStudy("/f/study.yaml", doc)
		if err != nil {
			if !errors.Is(err, ErrInvalidStudy) {
				t.Fatalf("error is not an ErrInvalidStudy: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted study does not validate: %v", err)
		}
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseStudy("/f/study.yaml", b)
		if err != nil {
			t.Fatalf("re-encoded study does not parse: %v\n%s", err, b)
		}
		if s.Hash() != back.Hash() {
			t.Fatalf("hash changed in a round trip:\n%s", b)
		}
	})
}

// TestAliasBomb: nested aliases that would expand to millions of values
// are refused quickly instead of being expanded.
func TestAliasBomb(t *testing.T) {
	doc := minimal + "search:\n  settings:\n    a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		doc += "    " + name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	_, err := ParseStudy("study.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "the study expands to more than") {
		t.Fatalf("got %v, want the expansion refused", err)
	}
}

// TestServerFlags: the flag list stays sorted (IsServerFlag searches it)
// and every flag batchtune owns is a real flag.
func TestServerFlags(t *testing.T) {
	if !slices.IsSorted(serverFlags) {
		t.Fatal("serverFlags is not sorted")
	}
	for name := range ownedFlags {
		if !IsServerFlag(name) {
			t.Errorf("owned flag %s is not in serverFlags", name)
		}
	}
	for _, tt := range []struct {
		flag string
		name string
		ok   bool
	}{
		{"--port=8500", "port", true},                  // with a value
		{"--enable_batching", "enable_batching", true}, // a bare bool
		{"-port=1", "", false},                         // one dash
		{"--Port=1", "", false},                        // upper case
		{"port=1", "", false},                          // no dashes
	} {
		name, ok := FlagName(tt.flag)
		if name != tt.name || ok != tt.ok {
			t.Errorf("FlagName(%q) = %q, %v; want %q, %v", tt.flag, name, ok, tt.name, tt.ok)
		}
	}
}
