package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/emulator/device"
	"github.com/batchtune/batchtune/emulator/tensor"
	"github.com/batchtune/batchtune/emulator/warmup"
	"github.com/batchtune/batchtune/tfserving"
)

// FileName is the model description inside a version directory.
const FileName = "model.json"

// Device kinds.
const (
	Accelerator = "accelerator"
	CPU         = "cpu"
)

// TF's signature method names.
const (
	PredictMethod  = "tensorflow/serving/predict"
	ClassifyMethod = "tensorflow/serving/classify"
	RegressMethod  = "tensorflow/serving/regress"
)

// DefaultSignature is the signature used when a request names none.
const DefaultSignature = "serving_default"

// Description is a model.json: a model's interface and its cost.
type Description struct {
	// Description is free text for people.
	Description string `yaml:"description"`
	// Signatures by name; a request without a signature name uses
	// "serving_default".
	Signatures map[string]Signature `yaml:"signatures"`
	// LoadTimeMS is how long loading takes before the model is AVAILABLE
	// (restoring variables, building the graph).
	LoadTimeMS float64 `yaml:"load_time_ms"`
	// Seed seeds the model's weights and its device jitter.
	Seed uint64 `yaml:"seed"`
	// Device is "accelerator" or "cpu"; the section of that name holds its
	// parameters.
	Device      string                  `yaml:"device"`
	Host        device.HostSpec         `yaml:"host"`
	Accelerator *device.AcceleratorSpec `yaml:"accelerator"`
	CPU         *device.CPUSpec         `yaml:"cpu"`
}

// Signature is one SignatureDef: named inputs and outputs.
type Signature struct {
	MethodName string                `yaml:"method_name"`
	Inputs     map[string]TensorSpec `yaml:"inputs"`
	Outputs    map[string]TensorSpec `yaml:"outputs"`
}

// TensorSpec is one signature input or output: its dtype (TF's enum name,
// "DT_FLOAT") and shape, whose first dimension is the batch dimension (-1).
type TensorSpec struct {
	DType string  `yaml:"dtype"`
	Shape []int64 `yaml:"shape"`
}

// DataType returns the spec's dtype as the proto enum.
func (t TensorSpec) DataType() tfserving.DataType {
	return tfserving.DataType(tfserving.DataType_value[t.DType])
}

// RowLen is the number of values per batch row.
func (t TensorSpec) RowLen() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return int(tensor.NumElements(t.Shape[1:]))
}

// Names returns a map's keys sorted: the order in which inputs are
// concatenated into a batch's feature rows and outputs cut from it.
func Names(m map[string]TensorSpec) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Features is the number of model inputs per row: the signature's input
// row lengths summed.
func (s Signature) Features() int {
	n := 0
	for _, t := range s.Inputs {
		n += t.RowLen()
	}
	return n
}

// OutputLen is the number of model outputs per row.
func (s Signature) OutputLen() int {
	n := 0
	for _, t := range s.Outputs {
		n += t.RowLen()
	}
	return n
}

// LoadTime returns LoadTimeMS as a duration.
func (d Description) LoadTime() time.Duration {
	return time.Duration(d.LoadTimeMS * float64(time.Millisecond))
}

// Features and Outputs are the row widths shared by every signature.
func (d Description) Features() int {
	for _, s := range d.Signatures {
		return s.Features()
	}
	return 0
}

// Outputs is the number of output values per row.
func (d Description) Outputs() int {
	for _, s := range d.Signatures {
		return s.OutputLen()
	}
	return 0
}

// Model is a loaded version directory.
type Model struct {
	Base    string // the base path given
	Version int64  // the version served
	Dir     string // Base/<Version>
	Path    string // Dir/model.json
	Desc    Description
}

// WarmupFile returns the path of the version's warmup file, or "" when it
// has none.
func (m *Model) WarmupFile() string {
	p := filepath.Join(m.Dir, warmup.FileName)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	return ""
}

var versionDir = regexp.MustCompile(`^[0-9]+$`)

// Load reads the latest version under base: the numeric directory with the
// largest value, as TF Serving's default version policy serves.
func Load(base string) (*Model, error) {
	st, err := os.Stat(base)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w %s", ErrBasePath, base)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBasePath, base, err)
	}
	version := int64(-1)
	for _, e := range entries {
		if !e.IsDir() || !versionDir.MatchString(e.Name()) {
			continue
		}
		if v, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && v > version {
			version = v
		}
	}
	if version < 0 {
		return nil, fmt.Errorf("%w %s", ErrNoVersions, base)
	}
	dir := filepath.Join(base, strconv.FormatInt(version, 10))
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist (the stand-in's model directories hold a %s where TF's hold saved_model.pb)", ErrNoDescription, path, FileName)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoDescription, path, err)
	}
	desc, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Version: version, Dir: dir, Path: path, Desc: desc}, nil
}

// Parse decodes and validates a model description. Errors name the file,
// the line and the field; all problems come back together, one per line.
func Parse(path string, data []byte) (Description, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Description{}, fmt.Errorf("%w: %s: empty file", ErrInvalid, path)
	}
	// JSON syntax first, for exact positions; then the same bytes as a
	// YAML node tree, whose nodes know their lines, for the field checks.
	var syntax any
	if err := json.Unmarshal(data, &syntax); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return Description{}, fmt.Errorf("%w: %s:%d:%d: JSON syntax error: %s", ErrInvalid, path, line, col, se.Error())
		}
		return Description{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil || len(root.Content) == 0 {
		return Description{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	lines := map[string]int{}
	var ps configs.Problems
	checkKeys(root.Content[0], "", descriptionKeys, lines, &ps)
	if len(ps) == 0 {
		var d Description
		if err := root.Decode(&d); err != nil {
			return Description{}, fmt.Errorf("%w: %s: %s", ErrInvalid, path, typeErrors(err))
		}
		d.validate(&ps)
		if len(ps) == 0 {
			d.defaults()
			return d, nil
		}
	}
	msgs := make([]string, len(ps))
	for i, p := range ps {
		loc := path
		if l, ok := lookupLine(lines, p.Field); ok {
			loc += ":" + strconv.Itoa(l)
		}
		msgs[i] = loc + ": " + p.String()
	}
	return Description{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
}

// position converts a byte offset to a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(off, int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// typeErrors flattens yaml's "unmarshal errors:\n  line 3: ..." list.
func typeErrors(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return err.Error()
}

// lookupLine finds the line of field or of its nearest ancestor.
func lookupLine(lines map[string]int, field string) (int, bool) {
	for f := field; f != ""; {
		if l, ok := lines[f]; ok {
			return l, true
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return 0, false
}

// keys describes which mapping keys are allowed where: a nil value means
// any value; a non-nil keys value the allowed keys of a nested mapping; the
// key "*" stands for any key (maps such as signatures).
type keys map[string]keys

var tensorKeys = keys{"dtype": nil, "shape": nil}

var descriptionKeys = keys{
	"description": nil,
	"signatures": {"*": {
		"method_name": nil,
		"inputs":      {"*": tensorKeys},
		"outputs":     {"*": tensorKeys},
	}},
	"load_time_ms": nil,
	"seed":         nil,
	"device":       nil,
	"host":         {"preprocess_rounds": nil, "spin_us": nil},
	"accelerator": {
		"launch_us": nil, "item_us": nil, "knee_items": nil, "jitter": nil,
		"memory_mib": nil, "weights_mib": nil, "activation_kib_per_item": nil,
		"cold_runs": nil, "cold_factor": nil,
	},
	"cpu": {"hidden": nil},
}

// checkKeys walks n against allowed, recording each field's line and a
// problem for each unknown key or non-mapping where a mapping belongs.
func checkKeys(n *yaml.Node, path string, allowed keys, lines map[string]int, ps *configs.Problems) {
	if n.Kind != yaml.MappingNode {
		name := path
		if name == "" {
			name = "(document)"
		}
		ps.Add(name, "must be a mapping ({...})")
		lines[name] = n.Line
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := k.Value
		if path != "" {
			field = path + "." + k.Value
		}
		lines[field] = k.Line
		sub, ok := allowed[k.Value]
		if !ok {
			sub, ok = allowed["*"]
		}
		if !ok {
			want := make([]string, 0, len(allowed))
			for a := range allowed {
				want = append(want, a)
			}
			slices.Sort(want)
			ps.Add(field, "unknown field (known: %s)", strings.Join(want, ", "))
			continue
		}
		if sub != nil {
			checkKeys(v, field, sub, lines, ps)
		}
		if v.Kind == yaml.SequenceNode {
			for j, e := range v.Content {
				lines[field+"["+strconv.Itoa(j)+"]"] = e.Line
			}
		}
	}
}

func (d *Description) validate(ps *configs.Problems) {
	if len(d.Signatures) == 0 {
		ps.Add("signatures", "must declare at least one signature")
	}
	features, outputs := -1, -1
	for _, name := range sortedKeys(d.Signatures) {
		s := d.Signatures[name]
		path := "signatures." + name
		switch s.MethodName {
		case "", PredictMethod, ClassifyMethod, RegressMethod:
		default:
			ps.Add(path+".method_name", "must be one of %s, %s, %s, got %q", PredictMethod, ClassifyMethod, RegressMethod, s.MethodName)
		}
		if len(s.Inputs) == 0 {
			ps.Add(path+".inputs", "must declare at least one input")
		}
		if len(s.Outputs) == 0 {
			ps.Add(path+".outputs", "must declare at least one output")
		}
		for _, in := range Names(s.Inputs) {
			checkTensor(path+".inputs."+in, s.Inputs[in], false, ps)
		}
		for _, out := range Names(s.Outputs) {
			checkTensor(path+".outputs."+out, s.Outputs[out], true, ps)
		}
		if features < 0 {
			features, outputs = s.Features(), s.OutputLen()
		} else if s.Features() != features || s.OutputLen() != outputs {
			ps.Add(path, "has %d input and %d output values per row; every signature of one model must have the same (%d and %d)", s.Features(), s.OutputLen(), features, outputs)
		}
	}
	if d.LoadTimeMS < 0 || d.LoadTimeMS > 600000 {
		ps.Add("load_time_ms", "must be in [0, 600000], got %g", d.LoadTimeMS)
	}
	d.Host.Validate("host", ps)
	switch d.Device {
	case Accelerator:
		if d.Accelerator == nil {
			ps.Add("accelerator", "is required when device is %q", Accelerator)
		} else {
			d.Accelerator.Validate("accelerator", ps)
		}
		if d.CPU != nil {
			ps.Add("cpu", "must not be set when device is %q", Accelerator)
		}
	case CPU:
		if d.CPU == nil {
			ps.Add("cpu", "is required when device is %q", CPU)
		} else {
			d.CPU.Validate("cpu", ps)
		}
		if d.Accelerator != nil {
			ps.Add("accelerator", "must not be set when device is %q", CPU)
		}
	default:
		ps.Add("device", "must be %q or %q, got %q", Accelerator, CPU, d.Device)
	}
}

func (d *Description) defaults() {
	for name, s := range d.Signatures {
		if s.MethodName == "" {
			s.MethodName = PredictMethod
			d.Signatures[name] = s
		}
	}
}

func checkTensor(path string, t TensorSpec, output bool, ps *configs.Problems) {
	dt, known := tfserving.DataType_value[t.DType]
	switch {
	case !known:
		ps.Add(path+".dtype", "unknown dtype %q (e.g. DT_FLOAT)", t.DType)
	case output && tfserving.DataType(dt) != tfserving.DataType_DT_FLOAT:
		ps.Add(path+".dtype", "outputs must be DT_FLOAT, got %s", t.DType)
	case !tensor.Supported(tfserving.DataType(dt)):
		ps.Add(path+".dtype", "the stand-in computes on numeric and bool inputs only, got %s", t.DType)
	}
	if len(t.Shape) == 0 {
		ps.Add(path+".shape", "must have a batch dimension: [-1, ...]")
		return
	}
	if t.Shape[0] != -1 {
		ps.Add(path+".shape[0]", "the batch dimension must be -1, got %d", t.Shape[0])
	}
	for i, s := range t.Shape[1:] {
		if s <= 0 {
			ps.Add(path+".shape["+strconv.Itoa(i+1)+"]", "must be positive (the stand-in has no ragged inputs), got %d", s)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
