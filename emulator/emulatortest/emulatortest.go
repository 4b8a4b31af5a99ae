// Package emulatortest helps tests that run the project's own binaries —
// the TF Serving stand-in above all — as real processes: it builds them
// from this source tree once per test binary, copies bundled models so a
// test may change them, and finds what a test left running.
//
// Use Main from TestMain so that the built binaries are removed:
//
//	func TestMain(m *testing.M) { emulatortest.Main(m) }
package emulatortest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	mu       sync.Mutex
	binDir   string
	built    = map[string]error{}
	rootOnce sync.Once
	root     string
	rootErr  error
)

// Main runs the package's tests and then removes what Binaries built.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes what Binaries built; for a TestMain that does more than
// Main.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if binDir != "" {
		os.RemoveAll(binDir)
		binDir, built = "", map[string]error{}
	}
}

// RepoRoot is the directory holding the module's go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/batchtune/batchtune\n") {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("emulatortest: no batchtune go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return root
}

// Binaries builds the named commands of this tree (tfs-emulator, batchtune:
// directories under cmd/) once per test binary and returns the directory
// holding them. A build failure fails t with the compiler's output.
func Binaries(t testing.TB, names ...string) string {
	t.Helper()
	r := RepoRoot(t)
	mu.Lock()
	defer mu.Unlock()
	if binDir == "" {
		dir, err := os.MkdirTemp("", "batchtune-testbin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = dir
	}
	var todo []string
	for _, n := range names {
		if err, ok := built[n]; ok {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		todo = append(todo, "./cmd/"+n)
	}
	if len(todo) > 0 {
		// go test puts its own GOROOT/bin first on the test's PATH; the
		// fallback is where the README installs Go.
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = "/usr/local/go/bin/go"
		}
		cmd := exec.Command(goBin, append([]string{"build", "-o", binDir + "/"}, todo...)...)
		cmd.Dir = r
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("emulatortest: go build %v: %v\n%s", todo, err, out)
		}
		for _, p := range todo {
			built[filepath.Base(p)] = err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return binDir
}

// Emulator returns the path of a freshly built tfs-emulator.
func Emulator(t testing.TB) string {
	t.Helper()
	return filepath.Join(Binaries(t, "tfs-emulator"), "tfs-emulator")
}

// Model is the path of bundled model name (configs/models/NAME).
func Model(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "configs", "models", name)
}

// ModelCopy copies bundled model name into a temporary directory and
// returns its base path; edit, when given, may change the model
// description of every version (its model.json, decoded) before it is
// written back.
func ModelCopy(t testing.TB, name string, edit func(m map[string]any)) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(base, os.DirFS(Model(t, name))); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		EditModel(t, base, edit)
	}
	return base
}

// EditModel rewrites the model.json of every version under base with edit.
func EditModel(t testing.TB, base string, edit func(m map[string]any)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(base, "*", "model.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("emulatortest: no model.json under %s: %v", base, err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		edit(m)
		if data, err = json.MarshalIndent(m, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ProcessesMentioning lists the live processes, other than this one, whose
// command line contains s: what a test left running under a directory of
// its own.
func ProcessesMentioning(s string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), s) {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
		if pid == os.Getpid() || zombie(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
