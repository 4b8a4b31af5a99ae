package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
)

// defaultSock is where .ci/engine-up starts the engine.
const defaultSock = "unix:///run/podman-batchtune.sock"

var (
	engineOnce sync.Once
	engineCli  *client.Client
	engineErr  error
)

// engine returns a client for the test engine (DOCKER_HOST, or the socket
// .ci/engine-up uses), skipping the test when none answers, or failing it
// when BATCHTUNE_ENGINE=required.
func engine(t testing.TB) *client.Client {
	t.Helper()
	engineOnce.Do(func() {
		engineCli, engineErr = newEngineClient()
		if engineErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, engineErr = engineCli.Ping(ctx)
	})
	if engineErr != nil {
		testenv.Unavailable(t, "no container engine (DOCKER_HOST=$(.ci/engine-up)): %v", engineErr)
	}
	return engineCli
}

// newEngineClient makes a client for DOCKER_HOST, or for the socket
// .ci/engine-up uses when DOCKER_HOST is unset.
func newEngineClient() (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if os.Getenv("DOCKER_HOST") == "" {
		opts = append(opts, client.WithHost(defaultSock))
	}
	return client.NewClientWithOpts(opts...)
}

const fakeRepo = "localhost/batchtune-runtime-fake"

var (
	fakeImageOnce sync.Once
	fakeImageRef  string
	fakeImageErr  error
)

// fakeImage builds (once, and only when the binary changed) a FROM scratch
// image holding the fake server as its entrypoint, through the engine's
// build API, and returns its reference.
func fakeImage(t testing.TB) string {
	t.Helper()
	cli := engine(t)
	bin := testenv.FakeServer(t)
	fakeImageOnce.Do(func() {
		data, err := os.ReadFile(bin)
		if err != nil {
			fakeImageErr = err
			return
		}
		sum := sha256.Sum256(data)
		ref := fakeRepo + ":" + hex.EncodeToString(sum[:6])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := cli.ImageInspect(ctx, ref); err == nil {
			fakeImageRef = ref
			return
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		dockerfile := "FROM scratch\nCOPY fakeserver /fakeserver\nENTRYPOINT [\"/fakeserver\"]\n"
		for _, f := range []struct {
			name string
			mode int64
			data []byte
		}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"fakeserver", 0o755, data}} {
			tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))})
			tw.Write(f.data)
		}
		tw.Close()
		resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{ref}, Dockerfile: "Dockerfile", Remove: true})
		if err != nil {
			fakeImageErr = err
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var msg struct {
				Error  string `json:"error"`
				Stream string `json:"stream"`
			}
			if err := dec.Decode(&msg); err == io.EOF {
				break
			} else if err != nil {
				fakeImageErr = err
				return
			}
			if msg.Error != "" {
				fakeImageErr = &buildError{msg.Error}
				return
			}
		}
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			fakeImageErr = err
			return
		}
		fakeImageRef = ref
		// Images of older fake servers are of no further use.
		old, _ := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", fakeRepo))})
		for _, im := range old {
			for _, tag := range im.RepoTags {
				if tag != ref && strings.HasPrefix(tag, fakeRepo+":") {
					cli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
				}
			}
		}
	})
	if fakeImageErr != nil {
		t.Fatalf("building the fake server's image: %v", fakeImageErr)
	}
	return fakeImageRef
}

type buildError struct{ msg string }

func (e *buildError) Error() string { return e.msg }

// studyFor names the study of a state dir, so that each test's containers
// carry their own label.
func studyFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "t" + hex.EncodeToString(sum[:5])
}

// modelDir is a host model directory the fake server checks for, mounted
// at /models/fake.
func modelDir(t testing.TB) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	return dir
}

func fakeOptions(t testing.TB, stateDir string) docker.Options {
	return docker.Options{
		Client:    engine(t),
		Study:     studyFor(stateDir),
		StateDir:  stateDir,
		Image:     fakeImage(t),
		ModelName: "fake",
		Mounts:    []docker.Mount{{Source: modelDir(t), Target: "/models/fake"}},
		StopGrace: time.Second,
	}
}

func newRuntime(t testing.TB, opts docker.Options) *docker.Runtime {
	t.Helper()
	rt, err := docker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// trialContainers lists the study's trial containers as "name (state)".
func trialContainers(t testing.TB, study string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := engine(t).ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelStudy+"="+study),
	)})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var out []string
	for _, c := range list {
		out = append(out, strings.Join(c.Names, ",")+" ("+c.State+")")
	}
	return out
}

func leftovers(t *testing.T, stateDir string) []string {
	return append(trialContainers(t, studyFor(stateDir)), testenv.TrialDirs(stateDir)...)
}

func kill(t *testing.T, s runtime.Server) {
	id, ok := docker.ContainerID(s)
	if !ok {
		t.Fatalf("not a docker server: %T", s)
	}
	if err := engine(t).ContainerKill(context.Background(), id, "KILL"); err != nil {
		t.Fatal(err)
	}
}

// removeContainer force-removes a container, ignoring one already gone.
func removeContainer(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := engine(t).ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		t.Errorf("removing %s: %v", name, err)
	}
}
