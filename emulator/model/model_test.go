package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const good = `{
  "signatures": {
    "serving_default": {
      "inputs": {"x": {"dtype": "DT_FLOAT", "shape": [-1, 4]}},
      "outputs": {"y": {"dtype": "DT_FLOAT", "shape": [-1, 2]}}
    }
  },
  "load_time_ms": 10,
  "device": "cpu",
  "cpu": {"hidden": [8]}
}`

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadPicksLatestVersion(t *testing.T) {
	base := t.TempDir()
	write(t, base, "1/model.json", good)
	write(t, base, "12/model.json", good)
	write(t, base, "3/model.json", good)
	write(t, base, "99.bak/model.json", "not even json")     // not a version: ignored
	write(t, base, "notes.txt", "a file, not a version dir") // ignored
	m, err := Load(base)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 12 || m.Dir != filepath.Join(base, "12") {
		t.Errorf("loaded version %d from %s, want 12", m.Version, m.Dir)
	}
	if got := m.Desc.Signatures["serving_default"].MethodName; got != PredictMethod {
		t.Errorf("default method name = %q, want %q", got, PredictMethod)
	}
	if m.Desc.Features() != 4 || m.Desc.Outputs() != 2 {
		t.Errorf("features, outputs = %d, %d; want 4, 2", m.Desc.Features(), m.Desc.Outputs())
	}
	if m.WarmupFile() != "" {
		t.Errorf("WarmupFile = %q without a warmup file", m.WarmupFile())
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		base  string // relative to the temp dir; default "."
		want  error
		msgs  []string // substrings the message must contain
	}{
		{
			// TF: "Could not find base path".
			name: "missing base path", base: "nope", want: ErrBasePath,
			msgs: []string{"nope"},
		},
		{
			// A base path with no numeric directory.
			name: "no versions", files: map[string]string{"latest/model.json": good}, want: ErrNoVersions,
		},
		{
			// A version directory without the description.
			name: "no description", files: map[string]string{"1/saved_model.pb": "x"}, want: ErrNoDescription,
			msgs: []string{filepath.Join("1", "model.json")},
		},
		{
			// Syntax errors name the file and the line.
			name: "syntax error", files: map[string]string{"1/model.json": "{\n  \"device\": \"cpu\",\n  \"cpu\": {\"hidden\": [8}\n}"}, want: ErrInvalid,
			msgs: []string{"model.json:3:", "JSON syntax error"},
		},
		{
			// An unknown field names its path and line.
			name: "unknown field",
			files: map[string]string{"1/model.json": strings.Replace(good, `"cpu": {"hidden": [8]}`,
				`"cpu": {"hidden": [8],
    "hiden": [9]}`, 1)},
			want: ErrInvalid,
			msgs: []string{"model.json:11: cpu.hiden: unknown field"},
		},
		{
			// A value of the wrong type names the line.
			name:  "wrong type",
			files: map[string]string{"1/model.json": strings.Replace(good, `"load_time_ms": 10`, `"load_time_ms": "ten"`, 1)},
			want:  ErrInvalid,
			msgs:  []string{"model.json", "line 8", "ten"},
		},
		{
			// Every invalid value is reported, together, with its path.
			name: "invalid values together",
			files: map[string]string{"1/model.json": `{
  "signatures": {"s": {
    "inputs": {"x": {"dtype": "DT_STRING", "shape": [4]}},
    "outputs": {"y": {"dtype": "DT_INT32", "shape": [-1, 0]}}
  }},
  "load_time_ms": -1,
  "device": "accelerator",
  "accelerator": {"item_us": 0, "memory_mib": 10, "weights_mib": 20, "activation_kib_per_item": 1, "jitter": 2}
}`},
			want: ErrInvalid,
			msgs: []string{
				"model.json:3: signatures.s.inputs.x.dtype: the stand-in computes on numeric and bool inputs only",
				"signatures.s.inputs.x.shape[0]: the batch dimension must be -1, got 4",
				"model.json:4: signatures.s.outputs.y.dtype: outputs must be DT_FLOAT",
				"signatures.s.outputs.y.shape[1]: must be positive",
				"model.json:6: load_time_ms: must be in [0, 600000], got -1",
				"model.json:8: accelerator.item_us: must be positive, got 0",
				"accelerator.jitter: must be in [0, 0.5], got 2",
				"accelerator.weights_mib: must be in [0, memory_mib=10), got 20",
			},
		},
		{
			// The device kind must name a section that is present.
			name:  "device without section",
			files: map[string]string{"1/model.json": strings.Replace(good, `"device": "cpu"`, `"device": "accelerator"`, 1)},
			want:  ErrInvalid,
			msgs:  []string{`accelerator: is required when device is "accelerator"`, `cpu: must not be set`},
		},
		{
			// An empty file is not a description.
			name: "empty", files: map[string]string{"1/model.json": ""}, want: ErrInvalid,
			msgs: []string{"empty file"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for rel, c := range tt.files {
				write(t, dir, rel, c)
			}
			base := dir
			if tt.base != "" {
				base = filepath.Join(dir, tt.base)
			}
			_, err := Load(base)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Load error %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			for _, m := range tt.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

// TestBundledModels loads every model shipped under configs/models.
func TestBundledModels(t *testing.T) {
	dirs, err := filepath.Glob("../../configs/models/*")
	if err != nil || len(dirs) < 2 {
		t.Fatalf("bundled models: %v %v (want at least two)", dirs, err)
	}
	devices := map[string]bool{}
	for _, d := range dirs {
		m, err := Load(d)
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		devices[m.Desc.Device] = true
	}
	if diff := cmp.Diff(map[string]bool{Accelerator: true, CPU: true}, devices); diff != "" {
		t.Errorf("bundled device kinds (-want +got)\n%s", diff)
	}
}

// FuzzParse: no description makes Parse panic, every error is one line,
// and an accepted description has a signature and a device.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"signatures": {"s": {"inputs": {}}}}`))
	f.Add([]byte(`[1, 2]`))
	f.Add([]byte(`{"device": "cpu", "cpu": {"hidden": [1e9]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Parse("m.json", in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(d.Signatures) == 0 || (d.Device != CPU && d.Device != Accelerator) {
			t.Fatalf("accepted an incomplete description: %+v", d)
		}
	})
}
