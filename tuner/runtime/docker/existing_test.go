package docker_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
)

// userBatching is the batching.config the user's own server runs with.
const userBatching = "max_batch_size { value: 4 }\nbatch_timeout_micros { value: 500 }\n"

// userContainer is a "production" server a user already runs.
type userContainer struct {
	name      string
	grpc      int
	rest      int
	modelDir  string
	autoRmove bool
}

// startUser creates and starts the user's container: the fake server with
// its own batching.config and flags, an environment variable, a label, a
// read-only model mount and fixed published ports.
func startUser(t *testing.T, autoRemove bool) userContainer {
	return startUserOn(t, autoRemove, "")
}

// startUserOn starts the user's container on a named network (with an
// alias), or on the engine's default one when netName is "".
func startUserOn(t *testing.T, autoRemove bool, netName string) userContainer {
	t.Helper()
	cli := engine(t)
	u := userContainer{name: "batchtune-test-user-" + randHex(4), modelDir: modelDir(t), autoRmove: autoRemove}
	if err := os.WriteFile(filepath.Join(u.modelDir, "batching.config"), []byte(userBatching), 0o644); err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 2)
	u.grpc, u.rest = p[0], p[1]
	restart := container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}
	if autoRemove {
		restart = container.RestartPolicy{} // the engine refuses --rm with a restart policy
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var netcfg *network.NetworkingConfig
	if netName != "" {
		netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			netName: {Aliases: []string{"tfserving"}},
		}}
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:        fakeImage(t),
		Env:          []string{"MODEL_NAME=fake", "MODEL_BASE_PATH=/models", "USER_SETTING=kept"},
		Cmd:          []string{"--enable_batching", "--batching_parameters_file=/models/fake/batching.config", "--tensorflow_intra_op_parallelism=1", "--grpc_max_threads=3"},
		Labels:       map[string]string{"com.example.owner": "ml-team"},
		ExposedPorts: nat.PortSet{"8500/tcp": {}, "8501/tcp": {}},
	}, &container.HostConfig{
		Binds: []string{u.modelDir + ":/models/fake:ro"},
		PortBindings: nat.PortMap{
			"8500/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(u.grpc)}},
			"8501/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(u.rest)}},
		},
		AutoRemove:    autoRemove,
		RestartPolicy: restart,
	}, netcfg, nil, u.name)
	if err != nil {
		t.Fatalf("creating the user's container: %v", err)
	}
	t.Cleanup(func() { removeContainer(t, u.name) })
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("starting the user's container: %v", err)
	}
	u.waitServing(t)
	return u
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// userServer is a Server view of the user's container, for the checks
// that ask the server what it runs with.
type userServer struct{ ep runtime.Endpoints }

func (u userServer) Endpoints() runtime.Endpoints   { return u.ep }
func (u userServer) Done() <-chan struct{}          { return nil }
func (u userServer) Exit() runtime.Exit             { return runtime.Exit{} }
func (u userServer) Stop(ctx context.Context) error { return nil }

func (u userContainer) server() userServer {
	return userServer{runtime.Endpoints{GRPC: "127.0.0.1:" + strconv.Itoa(u.grpc), REST: "127.0.0.1:" + strconv.Itoa(u.rest)}}
}

// waitServing waits until the user's server answers with its own config.
func (u userContainer) waitServing(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := runtime.WaitPorts(ctx, u.server()); err != nil {
		t.Fatalf("the user's server does not answer: %v", err)
	}
	st := testenv.GetFakeState(t, u.server())
	if st.Batching != userBatching {
		t.Fatalf("the user's server runs batching.config %q, want its own %q", st.Batching, userBatching)
	}
}

// view is the part of a container's configuration a user would notice if
// it changed.
type view struct {
	Name          string
	Image         string
	Entrypoint    []string
	Cmd           []string
	Env           []string
	Labels        map[string]string
	PortBindings  nat.PortMap
	Binds         []string
	AutoRemove    bool
	RestartPolicy string
	NetworkMode   string
	Networks      map[string][]string // network: aliases the user gave
}

func inspectView(t *testing.T, name string) (view, container.InspectResponse) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := engine(t).ContainerInspect(ctx, name)
	if err != nil {
		t.Fatalf("inspecting %s: %v", name, err)
	}
	env := slices.Clone(info.Config.Env)
	slices.Sort(env)
	return view{
		Name:          info.Name,
		Image:         info.Image,
		Entrypoint:    info.Config.Entrypoint,
		Cmd:           info.Config.Cmd,
		Env:           env,
		Labels:        info.Config.Labels,
		PortBindings:  info.HostConfig.PortBindings,
		Binds:         info.HostConfig.Binds,
		AutoRemove:    info.HostConfig.AutoRemove,
		RestartPolicy: string(info.HostConfig.RestartPolicy.Name),
		NetworkMode:   string(info.HostConfig.NetworkMode),
		Networks:      networks(info),
	}, info
}

// networks lists the networks a container is on with the aliases it was
// given (not the engine's own: its ID, which changes on recreation).
func networks(info container.InspectResponse) map[string][]string {
	out := map[string][]string{}
	if info.NetworkSettings == nil {
		return out
	}
	for name, es := range info.NetworkSettings.Networks {
		var aliases []string
		for _, a := range es.Aliases {
			if !strings.HasPrefix(info.ID, a) {
				aliases = append(aliases, a)
			}
		}
		slices.Sort(aliases)
		out[name] = aliases
	}
	return out
}

func running(t *testing.T, name string) (exists, isRunning bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := engine(t).ContainerInspect(ctx, name)
	if errdefs.IsNotFound(err) {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, info.State.Running
}

func existingOptions(t *testing.T, dir string, u userContainer) docker.Options {
	return docker.Options{
		Client:    engine(t),
		Study:     studyFor(dir),
		StateDir:  dir,
		Existing:  u.name,
		ModelName: "fake", // as a study names it; the container's own path stays
		StopGrace: time.Second,
	}
}

func snapshotPath(dir string) string {
	return filepath.Join(dir, studyFor(dir), "existing-container.json")
}

// checkTrial asserts that a trial runs where the user's server did, with
// the trial's batching.config, the user's other flags and environment, and
// none of the user's batching flags.
func checkTrial(t *testing.T, u userContainer, srv runtime.Server, cfg runtime.Config) {
	t.Helper()
	if diff := cmp.Diff(u.server().Endpoints(), srv.Endpoints()); diff != "" {
		t.Errorf("trial endpoints differ from the user's ports (-want +got):\n%s", diff)
	}
	testenv.CheckFake(t, srv, cfg)
	st := testenv.GetFakeState(t, srv)
	if slices.Contains(st.Args, "--batching_parameters_file=/models/fake/batching.config") || slices.Contains(st.Args, "--tensorflow_intra_op_parallelism=1") {
		t.Errorf("the trial kept the user's batching flags: %q", st.Args)
	}
	if !slices.Contains(st.Args, "--grpc_max_threads=3") {
		t.Errorf("the trial lost the user's other flags: %q", st.Args)
	}
	if !slices.Contains(st.Env, "USER_SETTING=kept") {
		t.Errorf("the trial lost the user's environment: %q", st.Env)
	}
	if st.ModelBasePath != "/models/fake" || slices.ContainsFunc(st.Args, func(a string) bool { return strings.HasPrefix(a, "--model_base_path") }) {
		t.Errorf("the trial's model path: %q from args %q; want the user's own, from MODEL_BASE_PATH", st.ModelBasePath, st.Args)
	}
}

// checkRestored asserts that the user's container is back exactly as it
// was and serves with its own configuration, the snapshot is gone and no
// trial container is left.
func checkRestored(t *testing.T, dir string, u userContainer, before view, beforeID string, sameID bool) {
	t.Helper()
	after, info := inspectView(t, u.name)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the user's container changed (-before +after):\n%s", diff)
	}
	if !info.State.Running {
		t.Errorf("the user's container is not running: %+v", info.State)
	}
	if sameID && info.ID != beforeID {
		t.Errorf("the user's container was replaced: ID %s, was %s", info.ID, beforeID)
	}
	u.waitServing(t)
	if _, err := os.Stat(snapshotPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("snapshot still there after the restore: %v", err)
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
}

// TestExisting tunes a user's running container in place: it is
// snapshotted and stopped, trials take its ports, flags, environment and
// mounts with their own batching.config, and Restore starts it again
// unchanged. A container started with --rm, which the engine deletes when
// it stops, is recreated from the snapshot.
func TestExisting(t *testing.T) {
	for _, autoRemove := range []bool{false, true} {
		t.Run("autoremove="+strconv.FormatBool(autoRemove), func(t *testing.T) {
			if autoRemove && testing.Short() {
				t.Skip("the recreate path runs without -short")
			}
			u := startUser(t, autoRemove)
			before, info := inspectView(t, u.name)
			dir := t.TempDir()
			rt := newRuntime(t, existingOptions(t, dir, u))
			ctx := context.Background()
			if err := rt.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(snapshotPath(dir)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a snapshot exists before the first Start: %v", err)
			}
			var srv runtime.Server
			for i, cfg := range []runtime.Config{
				{Batching: testenv.GoodBatching},
				{Batching: testenv.GoodBatching, IntraOpParallelism: 2, Flags: []string{"--rest_api_num_threads=2"}},
			} {
				var err error
				srv, err = rt.Start(ctx, cfg)
				if err != nil {
					t.Fatalf("Start #%d: %v", i+1, err)
				}
				if err := runtime.WaitPorts(ctx, srv); err != nil {
					t.Fatalf("WaitPorts #%d: %v\n%s", i+1, err, srv.Exit().Log)
				}
				checkTrial(t, u, srv, cfg)
				if _, err := os.Stat(snapshotPath(dir)); err != nil {
					t.Errorf("no snapshot while trials run: %v", err)
				}
				exists, isRunning := running(t, u.name)
				if isRunning || exists == autoRemove {
					t.Errorf("the user's container during a trial: exists %v running %v; want stopped (removed with --rm)", exists, isRunning)
				}
			}
			if err := rt.Restore(ctx); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			select {
			case <-srv.Done():
			default:
				t.Error("the trial server still runs after Restore")
			}
			checkRestored(t, dir, u, before, info.ID, !autoRemove)
			if err := rt.Restore(ctx); err != nil {
				t.Errorf("second Restore: %v", err)
			}
		})
	}
}

// TestExistingOnNetwork: a user's container on a named network, with an
// alias other services use, is tuned on that network and comes back on it,
// also when it is recreated.
func TestExistingOnNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	cli := engine(t)
	netName := "batchtune-test-net-" + randHex(4)
	if _, err := cli.NetworkCreate(context.Background(), netName, network.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), netName) })
	for _, autoRemove := range []bool{false, true} {
		t.Run("autoremove="+strconv.FormatBool(autoRemove), func(t *testing.T) {
			u := startUserOn(t, autoRemove, netName)
			before, info := inspectView(t, u.name)
			if _, ok := before.Networks[netName]; !ok || !slices.Contains(before.Networks[netName], "tfserving") {
				t.Fatalf("the user's container is not on %s with its alias: %v", netName, before.Networks)
			}
			dir := t.TempDir()
			rt := newRuntime(t, existingOptions(t, dir, u))
			ctx := context.Background()
			if err := rt.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			cfg := runtime.Config{Batching: testenv.GoodBatching}
			srv, err := rt.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := runtime.WaitPorts(ctx, srv); err != nil {
				t.Fatalf("WaitPorts: %v\n%s", err, srv.Exit().Log)
			}
			checkTrial(t, u, srv, cfg)
			id, _ := docker.ContainerID(srv)
			trial, err := cli.ContainerInspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := networks(trial); !slices.Contains(got[netName], "tfserving") {
				t.Errorf("the trial is not on %s with the user's alias: %v", netName, got)
			}
			if err := rt.Restore(ctx); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			checkRestored(t, dir, u, before, info.ID, !autoRemove)
		})
	}
}

// TestProduction reads the user's configuration, the tuner's baseline,
// from the container before and after it is stopped for tuning.
func TestProduction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	u := startUser(t, false)
	dir := t.TempDir()
	rt := newRuntime(t, existingOptions(t, dir, u))
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	want := docker.Production{
		Args:         []string{"--enable_batching", "--batching_parameters_file=/models/fake/batching.config", "--tensorflow_intra_op_parallelism=1", "--grpc_max_threads=3"},
		Batching:     []byte(userBatching),
		BatchingPath: "/models/fake/batching.config",
	}
	got, err := rt.Production(ctx)
	if err != nil {
		t.Fatalf("Production while it runs: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Production while it runs (-want +got):\n%s", diff)
	}
	if _, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching}); err != nil {
		t.Fatal(err)
	}
	got, err = rt.Production(ctx)
	if err != nil {
		t.Fatalf("Production while stopped for tuning: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Production while stopped (-want +got):\n%s", diff)
	}

	// Without an existing container there is no production to read.
	plain := newRuntime(t, fakeOptions(t, t.TempDir()))
	if _, err := plain.Production(ctx); err == nil {
		t.Error("Production without an existing container: got nil error")
	}
}

// TestExistingCancelled: the tuner's context is cancelled (Ctrl-C) while a
// trial runs; Stop returns at once and Restore, with a fresh context, puts
// the user's container back.
func TestExistingCancelled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	u := startUser(t, false)
	before, info := inspectView(t, u.name)
	dir := t.TempDir()
	rt := newRuntime(t, existingOptions(t, dir, u))
	ctx, cancel := context.WithCancel(context.Background())
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.WaitPorts(ctx, srv); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with the cancelled context: got %v, want context.Canceled", err)
	}
	if err := rt.Restore(context.Background()); err != nil {
		t.Fatalf("Restore with a fresh context: %v", err)
	}
	checkRestored(t, dir, u, before, info.ID, true)
}

// TestExistingNotFound: a study naming a container that does not exist
// fails Recover, before anything is touched.
func TestExistingNotFound(t *testing.T) {
	engine(t)
	dir := t.TempDir()
	rt := newRuntime(t, docker.Options{Client: engine(t), Study: studyFor(dir), StateDir: dir, Existing: "batchtune-test-no-such-container"})
	err := rt.Recover(context.Background())
	if !errors.Is(err, docker.ErrContainerNotFound) || !strings.Contains(err.Error(), "batchtune-test-no-such-container") {
		t.Fatalf("Recover: got %v, want ErrContainerNotFound naming the container", err)
	}
}

const childEnv = "BATCHTUNE_DOCKER_TEST_CHILD"

// TestExistingCrashSafety: batchtune is killed with SIGKILL in the middle
// of a trial on a user's container. The trial container is left running
// and the user's container stopped (or, with --rm, gone); a fresh runtime's
// Recover removes the trial and puts the user's container back with its
// original configuration, before anything else.
func TestExistingCrashSafety(t *testing.T) {
	for _, autoRemove := range []bool{false, true} {
		t.Run("autoremove="+strconv.FormatBool(autoRemove), func(t *testing.T) {
			if autoRemove && testing.Short() {
				t.Skip("the recreate path runs without -short")
			}
			u := startUser(t, autoRemove)
			before, info := inspectView(t, u.name)
			dir := t.TempDir()

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), childEnv+"="+dir, "CHILD_STUDY="+studyFor(dir), "CHILD_EXISTING="+u.name)
			stdout, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { child.Process.Kill(); child.Wait() })
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			trialID, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
			if !ok {
				t.Fatalf("child said %q", line)
			}

			// Mid-trial: SIGKILL, no chance to clean up.
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			child.Wait()

			// What a crash leaves: make sure the test sees a real mess.
			if _, r := running(t, trialID); !r {
				t.Fatal("the trial container is not running after the crash: the test cannot tell anything")
			}
			if exists, r := running(t, u.name); r || exists == autoRemove {
				t.Fatalf("the user's container after the crash: exists %v running %v", exists, r)
			}
			if _, err := os.Stat(snapshotPath(dir)); err != nil {
				t.Fatalf("no snapshot after the crash: %v", err)
			}

			rt := newRuntime(t, existingOptions(t, dir, u))
			if err := rt.Recover(context.Background()); err != nil {
				t.Fatalf("Recover after the crash: %v", err)
			}
			if exists, _ := running(t, trialID); exists {
				t.Error("the crashed run's trial container survived Recover")
			}
			checkRestored(t, dir, u, before, info.ID, !autoRemove)
			if err := rt.Restore(context.Background()); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if _, r := running(t, u.name); !r {
				t.Error("Restore without a trial stopped the user's container")
			}
		})
	}
}

// crashChild is the batchtune killed in TestExistingCrashSafety: it takes
// over the user's container, starts a trial, says READY and the trial
// container's ID, and waits to be killed.
func crashChild() int {
	fail := func(err error) int {
		os.Stdout.WriteString("ERR " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n")
		return 1
	}
	cli, err := newEngineClient()
	if err != nil {
		return fail(err)
	}
	rt, err := docker.New(docker.Options{
		Client:   cli,
		Study:    os.Getenv("CHILD_STUDY"),
		StateDir: os.Getenv(childEnv),
		Existing: os.Getenv("CHILD_EXISTING"),
	})
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		return fail(err)
	}
	srv, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		return fail(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := runtime.WaitPorts(wctx, srv); err != nil {
		return fail(err)
	}
	id, _ := docker.ContainerID(srv)
	os.Stdout.WriteString("READY " + id + "\n")
	time.Sleep(10 * time.Minute)
	return 0
}
