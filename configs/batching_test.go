package configs

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/batchtune/batchtune/tfserving"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestEncodeBatchingGolden(t *testing.T) {
	tests := []struct {
		name string
		p    *tfserving.BatchingParameters
	}{
		// Every field that TF Serving reads, in field-number order.
		{"full", &tfserving.BatchingParameters{
			MaxBatchSize:              wrapperspb.Int64(32),
			BatchTimeoutMicros:        wrapperspb.Int64(2000),
			MaxEnqueuedBatches:        wrapperspb.Int64(100),
			NumBatchThreads:           wrapperspb.Int64(4),
			ThreadPoolName:            wrapperspb.String("model_pool"),
			AllowedBatchSizes:         []int64{8, 16, 32},
			PadVariableLengthInputs:   true,
			EnableLargeBatchSplitting: wrapperspb.Bool(false),
			MaxExecutionBatchSize:     wrapperspb.Int64(32),
		}},
		// The seeds' starting recipe, as batchtune exports it.
		{"seed_recipe", Batching{MaxBatchSize: 8, BatchTimeoutMicros: 20000, MaxEnqueuedBatches: 32, NumBatchThreads: 1}.Params()},
		// An empty file: every field at TF's default.
		{"empty", &tfserving.BatchingParameters{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EncodeBatching(tt.p)
			path := filepath.Join("testdata", "batching", tt.name+".config")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file (run with -update to create): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("EncodeBatching mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// randomParams builds a message with a random subset of fields set to random
// (not necessarily valid) values.
func randomParams(r *rand.Rand) *tfserving.BatchingParameters {
	p := &tfserving.BatchingParameters{}
	maybe := func() bool { return r.IntN(2) == 0 }
	i64 := func() *wrapperspb.Int64Value { return wrapperspb.Int64(r.Int64N(1<<40) - 1<<20) }
	if maybe() {
		p.MaxBatchSize = i64()
	}
	if maybe() {
		p.BatchTimeoutMicros = i64()
	}
	if maybe() {
		p.MaxEnqueuedBatches = i64()
	}
	if maybe() {
		p.NumBatchThreads = i64()
	}
	if maybe() {
		const alphabet = "abc_XYZ019 \"\\\n\t"
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		p.ThreadPoolName = wrapperspb.String(b.String())
	}
	for range r.IntN(5) {
		p.AllowedBatchSizes = append(p.AllowedBatchSizes, r.Int64N(4096)-8)
	}
	p.PadVariableLengthInputs = maybe()
	if maybe() {
		p.EnableLargeBatchSplitting = wrapperspb.Bool(maybe())
	}
	if maybe() {
		p.MaxExecutionBatchSize = i64()
	}
	return p
}

func TestBatchingRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		p := randomParams(r)
		text := EncodeBatching(p)
		got, err := DecodeBatching(text)
		if err != nil {
			t.Fatalf("case %d: decode of encoded %q: %v", i, text, err)
		}
		if diff := cmp.Diff(p, got, protocmp.Transform()); diff != "" {
			t.Fatalf("case %d: round trip mismatch (-want +got):\n%s\ntext:\n%s", i, diff, text)
		}
	}
}

func TestResolveParamsRoundTrip(t *testing.T) {
	// Params writes every tuned field, so resolving it gives back the same
	// settings whatever the server's defaults.
	b := Batching{MaxBatchSize: 64, BatchTimeoutMicros: 1500, MaxEnqueuedBatches: 4, NumBatchThreads: 2,
		ThreadPoolName: DefaultThreadPoolName, AllowedBatchSizes: []int64{16, 64}, MaxExecutionBatchSize: DefaultMaxExecutionBatchSize}
	if diff := cmp.Diff(b, Resolve(b.Params(), 96)); diff != "" {
		t.Errorf("Resolve(Params()) mismatch (-want +got):\n%s", diff)
	}
	// Unset fields take TF's defaults; num_batch_threads is the core count.
	want := Batching{MaxBatchSize: 1000, MaxEnqueuedBatches: 10, NumBatchThreads: 3, ThreadPoolName: "batch_threads", MaxExecutionBatchSize: 1000}
	if diff := cmp.Diff(want, Resolve(&tfserving.BatchingParameters{}, 3)); diff != "" {
		t.Errorf("Resolve(empty) mismatch (-want +got):\n%s", diff)
	}
}

func TestDecodeBatching(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    *tfserving.BatchingParameters
		wantErr string
	}{
		// The format TF Serving's docs show, with a comment and odd spacing.
		{"docs_example", "# tuned\nmax_batch_size { value: 128 }\nbatch_timeout_micros {value:0}\n  allowed_batch_sizes: 32\nallowed_batch_sizes: 128\n",
			&tfserving.BatchingParameters{MaxBatchSize: wrapperspb.Int64(128), BatchTimeoutMicros: wrapperspb.Int64(0), AllowedBatchSizes: []int64{32, 128}}, ""},
		// A bare integer where TF wants a wrapper message.
		{"bare_scalar", "max_batch_size: 32\n", nil, "line 1"},
		// Unknown field, with its line.
		{"unknown_field", "max_batch_size { value: 32 }\nmax_batch: 3\n", nil, "line 2:1"},
		// JSON is refused, as TF Serving refuses it.
		{"json", ` {"max_batch_size": {"value": 32}}`, nil, "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBatching([]byte(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecodeBatching error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := DecodeBatching([]byte("{}")); !errors.Is(err, ErrJSONBatchingConfig) {
		t.Errorf("JSON error = %v, want ErrJSONBatchingConfig", err)
	}
}

func TestValidateBatching(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // fields named, in order; nil means valid
	}{
		// TF's defaults are valid.
		{"empty", "", nil},
		// A typical tuned file.
		{"valid", "max_batch_size { value: 64 } batch_timeout_micros { value: 500 } allowed_batch_sizes: 16 allowed_batch_sizes: 64", nil},
		// Last allowed size must equal max_batch_size.
		{"allowed_last", "max_batch_size { value: 64 } allowed_batch_sizes: 16 allowed_batch_sizes: 32", []string{"allowed_batch_sizes[1]"}},
		// Unset max_batch_size means 1000, and the rule still applies.
		{"allowed_last_default", "allowed_batch_sizes: 1000", nil},
		// Sizes must increase and be positive; every problem is reported (the
		// last entry does equal max_batch_size here, wrongly 0).
		{"many", "max_batch_size { value: 0 } num_batch_threads { value: -1 } batch_timeout_micros { value: -5 } max_enqueued_batches { value: 0 } allowed_batch_sizes: 0 allowed_batch_sizes: 0",
			[]string{"max_batch_size", "max_enqueued_batches", "num_batch_threads", "batch_timeout_micros", "allowed_batch_sizes[0]", "allowed_batch_sizes[1]", "allowed_batch_sizes[1]"}},
		// With splitting, the last allowed size matches max_execution_batch_size.
		{"splitting", "max_batch_size { value: 256 } enable_large_batch_splitting { value: true } max_execution_batch_size { value: 64 } allowed_batch_sizes: 32 allowed_batch_sizes: 64", nil},
		// And the execution size cannot exceed max_batch_size.
		{"splitting_exec_too_big", "max_batch_size { value: 32 } enable_large_batch_splitting { value: true } max_execution_batch_size { value: 64 }", []string{"max_execution_batch_size"}},
		// An empty thread pool name would make TF create an unnamed pool.
		{"pool_name", `thread_pool_name { value: "" }`, []string{"thread_pool_name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodeBatching([]byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			err = ValidateBatching(p)
			var got []string
			if err != nil {
				var ps Problems
				if !errors.As(err, &ps) {
					t.Fatalf("error %v is not Problems", err)
				}
				for _, pr := range ps {
					got = append(got, pr.Field)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestLoadBatchingNamesFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "batching.config")
	if err := os.WriteFile(path, []byte("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadBatching(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), "allowed_batch_sizes[0]") {
		t.Errorf("LoadBatching error = %v, want it to start with the path and name the field", err)
	}
	if _, err := LoadBatching(filepath.Join(dir, "missing.config")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file error = %v, want ErrNotExist", err)
	}
}

func FuzzDecodeBatching(f *testing.F) {
	f.Add([]byte("max_batch_size { value: 32 }\nallowed_batch_sizes: 8\n"))
	f.Add([]byte(`thread_pool_name { value: "x\n" } pad_variable_length_inputs: true`))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeBatching(data)
		if err != nil {
			return
		}
		_ = ValidateBatching(p) // must not panic on anything that decodes
		// Whatever decodes must survive our encoder unchanged.
		again, err := DecodeBatching(EncodeBatching(p))
		if err != nil {
			t.Fatalf("re-decode of encoded %q: %v", EncodeBatching(p), err)
		}
		if !proto.Equal(p, again) {
			t.Fatalf("round trip changed the message: %v -> %v", p, again)
		}
	})
}
