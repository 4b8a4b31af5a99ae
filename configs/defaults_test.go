package configs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

const referencePath = "examples/reference.yaml"

// TestReferenceYAML keeps configs/examples/reference.yaml equal to what
// ReferenceYAML writes from DefaultStudy, so the documented defaults
// cannot drift from the real ones. Rewrite it with -update.
func TestReferenceYAML(t *testing.T) {
	got := ReferenceYAML()
	if *update {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (generate it with go test ./configs -run TestReferenceYAML -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; regenerate with go test ./configs -run TestReferenceYAML -update (-file +generated):\n%s", referencePath, diff)
	}
}

// TestReferenceDecodesToDefaults decodes the reference file the way a
// study is decoded and gets DefaultStudy back: every key it shows holds
// the default, and every key is one the decoder knows.
func TestReferenceDecodesToDefaults(t *testing.T) {
	data, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	got := DefaultStudy()
	d := decoder{lines: map[string]int{}}
	d.document(data, got)
	if len(d.problems) != 0 {
		t.Fatalf("reference.yaml does not decode: %v", d.problems)
	}
	if diff := cmp.Diff(DefaultStudy(), got, cmpopts.IgnoreUnexported(Study{})); diff != "" {
		t.Errorf("reference.yaml differs from DefaultStudy (-want +got):\n%s", diff)
	}
	// Every key of the study appears in the file.
	for _, p := range docPaths() {
		if _, ok := d.lines[p]; !ok && !isListItemKey(p) {
			t.Errorf("reference.yaml does not show %s", p)
		}
	}
}

// isListItemKey reports keys of list items (load.payload.inputs.name):
// the reference shows the empty default list, not an item.
func isListItemKey(p string) bool {
	return filepath.Dir(filepath.FromSlash(replaceDots(p))) == filepath.FromSlash("load/payload/inputs")
}

func replaceDots(p string) string {
	out := []byte(p)
	for i := range out {
		if out[i] == '.' {
			out[i] = '/'
		}
	}
	return string(out)
}

// TestFieldDocs requires a comment for every key and no comment for a key
// that does not exist.
func TestFieldDocs(t *testing.T) {
	paths := map[string]bool{}
	for _, p := range docPaths() {
		paths[p] = true
		if fieldDocs[p] == "" {
			t.Errorf("fieldDocs has no text for %s", p)
		}
	}
	for p := range fieldDocs {
		if !paths[p] {
			t.Errorf("fieldDocs documents %s, which is not a key of a study", p)
		}
	}
}

// TestDefaultStudyEncodes checks the defaults survive a YAML round trip
// through the ordinary encoder too, so tools that re-encode a Study keep it.
func TestDefaultStudyEncodes(t *testing.T) {
	b, err := yaml.Marshal(DefaultStudy())
	if err != nil {
		t.Fatal(err)
	}
	got := DefaultStudy()
	d := decoder{lines: map[string]int{}}
	d.document(b, got)
	if len(d.problems) != 0 {
		t.Fatalf("re-encoded defaults do not decode: %v\n%s", d.problems, b)
	}
	if diff := cmp.Diff(DefaultStudy(), got, cmpopts.IgnoreUnexported(Study{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
