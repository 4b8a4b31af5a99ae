package emulatortest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestBinariesAndModels(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the stand-in")
	}
	bin := Emulator(t)
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	if !strings.Contains(string(out), "model_base_path") {
		t.Errorf("%s --help does not list --model_base_path:\n%s", bin, out)
	}
	// A second call reuses the build.
	if again := Emulator(t); again != bin {
		t.Errorf("second build at %s, first at %s", again, bin)
	}
	base := ModelCopy(t, "ranker", func(m map[string]any) { m["load_time_ms"] = 42 })
	data, err := os.ReadFile(filepath.Join(base, "1", "model.json"))
	if err != nil || !strings.Contains(string(data), `"load_time_ms": 42`) {
		t.Errorf("edited copy: %s, %v", data, err)
	}
	orig, _ := os.ReadFile(filepath.Join(Model(t, "ranker"), "1", "model.json"))
	if strings.Contains(string(orig), `"load_time_ms": 42`) {
		t.Error("the edit reached the bundled model")
	}
}

func TestProcessesMentioning(t *testing.T) {
	marker := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 30; : "+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := ProcessesMentioning(marker)
	if len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Errorf("ProcessesMentioning = %v, want [%d]", pids, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if pids := ProcessesMentioning(marker); len(pids) != 0 {
		t.Errorf("after kill: %v", pids)
	}
}
