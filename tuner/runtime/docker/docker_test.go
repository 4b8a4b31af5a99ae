package docker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"

	"github.com/batchtune/batchtune/tuner/runtime"
	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/internal/testenv"
	"github.com/batchtune/batchtune/tuner/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(crashChild())
	}
	code := m.Run()
	testenv.CleanupFake()
	os.Exit(code)
}

// TestConformanceFake runs the suite over the docker runtime on the real
// engine, with the tests' own fake server in a FROM scratch image.
func TestConformanceFake(t *testing.T) {
	engine(t)
	runtimetest.Run(t, testenv.FakeHarness(runtimetest.Harness{
		New: func(t *testing.T, dir string) runtime.Runtime {
			return newRuntime(t, fakeOptions(t, dir))
		},
		Leftovers: leftovers,
		Kill:      kill,
	}))
}

// TestConformanceStandIn runs the suite over the docker runtime with the
// project's stand-in image (make image).
func TestConformanceStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("the stand-in suite runs without -short; the fake server's covers the mechanics")
	}
	cli := engine(t)
	si := testenv.StandIn(t, testenv.RepoRoot(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, si.Image); err != nil {
		testenv.Unavailable(t, "stand-in image %s: %v (run make image)", si.Image, err)
	}
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T, dir string) runtime.Runtime {
			return newRuntime(t, docker.Options{
				Client:    cli,
				Study:     studyFor(dir),
				StateDir:  dir,
				Image:     si.Image,
				ModelName: si.Model,
				StopGrace: 2 * time.Second,
			})
		},
		Leftovers:   leftovers,
		Kill:        kill,
		Model:       si.Model,
		Good:        si.Good,
		Rejected:    si.Rejected,
		RejectedLog: si.RejectedLog,
	})
}

// TestEngineUnreachable: with no engine at the address, Recover fails with
// ErrEngineUnreachable naming the address, promptly; an engine that accepts
// connections and never answers is given up on after EngineTimeout.
func TestEngineUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()

	tests := []struct {
		name string
		host string
	}{
		// No socket file at all.
		{"missing socket", "unix:///nonexistent/batchtune-test.sock"},
		// A TCP port nobody listens on.
		{"refused", "tcp://" + refusedAddr},
		// A listener that never says anything: bounded by EngineTimeout.
		{"silent", "tcp://" + silent.Addr().String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli, err := client.NewClientWithOpts(client.WithHost(tt.host), client.WithAPIVersionNegotiation())
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			rt, err := docker.New(docker.Options{Client: cli, Image: "x", StateDir: t.TempDir(), EngineTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = rt.Recover(context.Background())
			took := time.Since(began)
			if !errors.Is(err, docker.ErrEngineUnreachable) {
				t.Fatalf("Recover: got %v, want ErrEngineUnreachable", err)
			}
			if !strings.Contains(err.Error(), strings.TrimPrefix(strings.TrimPrefix(tt.host, "tcp://"), "unix://")) {
				t.Errorf("error does not name the address %s: %v", tt.host, err)
			}
			// A watchdog, not a measurement: the ping is bounded by
			// EngineTimeout (0.5s), so a minute means it hung.
			if took > time.Minute {
				t.Errorf("Recover took %v", took)
			}
			if _, err := rt.Start(context.Background(), runtime.Config{}); !errors.Is(err, runtime.ErrNotRecovered) {
				t.Errorf("Start after a failed Recover: got %v, want ErrNotRecovered", err)
			}
			if err := rt.Restore(context.Background()); err != nil {
				t.Errorf("Restore after a failed Recover: %v", err)
			}
		})
	}
}

// TestImageMissing: an image the engine does not have fails Recover with
// ErrImageMissing naming it, and leaves the study free.
func TestImageMissing(t *testing.T) {
	dir := t.TempDir()
	opts := fakeOptions(t, dir)
	opts.Image = "localhost/batchtune-no-such-image:missing"
	opts.Pull = docker.PullNever // TestPullPolicy covers pulling
	rt := newRuntime(t, opts)
	for i := range 2 { // the second time: not ErrBusy, the lock was released
		err := rt.Recover(context.Background())
		if !errors.Is(err, docker.ErrImageMissing) || !strings.Contains(err.Error(), opts.Image) {
			t.Fatalf("Recover #%d: got %v, want ErrImageMissing naming %s", i+1, err, opts.Image)
		}
	}
}

// TestPorts: fixed host ports are published as given; a fixed port that is
// taken fails Start with ErrPortInUse naming it, before a container exists.
func TestPorts(t *testing.T) {
	engine(t)
	ctx := context.Background()
	free := freePorts(t, 2)
	dir := t.TempDir()
	opts := fakeOptions(t, dir)
	opts.GRPCPort, opts.RESTPort = free[0], free[1]
	rt := newRuntime(t, opts)
	if err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Restore(ctx)
	srv, err := rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Endpoints{GRPC: "127.0.0.1:" + strconv.Itoa(free[0]), REST: "127.0.0.1:" + strconv.Itoa(free[1])}
	if diff := cmp.Diff(want, srv.Endpoints()); diff != "" {
		t.Errorf("Endpoints (-want +got):\n%s", diff)
	}
	if err := runtime.WaitPorts(ctx, srv); err != nil {
		t.Fatal(err)
	}
	// Restarting on the same fixed ports works: the old container is gone
	// before the ports are checked.
	srv, err = rt.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if err != nil {
		t.Fatalf("restart on fixed ports: %v", err)
	}
	if err := runtime.WaitPorts(ctx, srv); err != nil {
		t.Fatal(err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bport := busy.Addr().(*net.TCPAddr).Port
	dir2 := t.TempDir()
	opts2 := fakeOptions(t, dir2)
	opts2.RESTPort = bport
	rt2 := newRuntime(t, opts2)
	if err := rt2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt2.Restore(ctx)
	_, err = rt2.Start(ctx, runtime.Config{Batching: testenv.GoodBatching})
	if !errors.Is(err, runtime.ErrPortInUse) || !strings.Contains(err.Error(), "REST port 127.0.0.1:"+strconv.Itoa(bport)) {
		t.Fatalf("Start on a busy port: got %v, want ErrPortInUse naming REST port %d", err, bport)
	}
	if left := leftovers(t, dir2); len(left) > 0 {
		t.Errorf("a refused Start left %q", left)
	}
}

func freePorts(t *testing.T, n int) []int {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// TestNetworks: on the host network the server is told the free ports
// picked for it; on a named network its ports are published as on the
// default one. Either way it answers where the endpoints say.
func TestNetworks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	cli := engine(t)
	ctx := context.Background()
	netName := "batchtune-test-net-" + randHex(4)
	if _, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{}); err != nil {
		t.Fatalf("creating network %s: %v", netName, err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), netName) })
	for _, mode := range []string{"host", netName} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			opts := fakeOptions(t, dir)
			opts.Network = mode
			rt := newRuntime(t, opts)
			if err := rt.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			defer rt.Restore(ctx)
			cfg := runtime.Config{Batching: testenv.GoodBatching, InterOpParallelism: 2}
			srv, err := rt.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := runtime.WaitPorts(ctx, srv); err != nil {
				t.Fatalf("WaitPorts: %v\n%s", err, srv.Exit().Log)
			}
			testenv.CheckFake(t, srv, cfg)
			st := testenv.GetFakeState(t, srv)
			wantPort := "8500"
			if mode == "host" {
				_, wantPort, _ = net.SplitHostPort(srv.Endpoints().GRPC)
			}
			if !containsString(st.Args, "--port="+wantPort) {
				t.Errorf("server args %q lack --port=%s", st.Args, wantPort)
			}
			id, _ := docker.ContainerID(srv)
			info, err := cli.ContainerInspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			// Docker names the network in NetworkMode; podman says
			// "bridge" there and lists the network it joined.
			_, joined := info.NetworkSettings.Networks[mode]
			if mode == "host" {
				joined = info.HostConfig.NetworkMode.IsHost()
			}
			if !joined {
				t.Errorf("not on network %q: mode %q, networks %v", mode, info.HostConfig.NetworkMode, info.NetworkSettings.Networks)
			}
		})
	}
}

// TestPullPolicy: an image the engine lacks is pulled unless the policy
// says never; a pull that cannot succeed is a clear error, not a hang.
func TestPullPolicy(t *testing.T) {
	engine(t)
	// Nothing listens on port 1: the registry refuses at once.
	const unpullable = "localhost:1/batchtune/none:missing"
	tests := []struct {
		name  string
		image string
		pull  string
		want  string // in the error; "" for success
	}{
		// Never: missing is an error, and nothing is tried.
		{"never", unpullable, docker.PullNever, "pull policy never"},
		// Missing: the pull is tried and its failure reported.
		{"missing", unpullable, docker.PullMissing, "pulling it failed"},
		// Missing, but present: no pull.
		{"present", "", docker.PullMissing, ""},
		// Always: even a present local image is pulled, which fails here
		// (a localhost/ image has no registry).
		{"always", "", docker.PullAlways, "pulling it failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() && tt.pull != docker.PullNever && tt.want != "" {
				t.Skip("failing pulls (seconds of engine retries) run without -short")
			}
			opts := fakeOptions(t, t.TempDir())
			if tt.image != "" {
				opts.Image = tt.image
			}
			opts.Pull = tt.pull
			opts.PullTimeout = 30 * time.Second
			rt := newRuntime(t, opts)
			err := rt.Recover(context.Background())
			defer rt.Restore(context.Background())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Recover: %v", err)
				}
				return
			}
			if !errors.Is(err, docker.ErrImageMissing) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), opts.Image) {
				t.Fatalf("Recover: got %v, want ErrImageMissing with %q naming %s", err, tt.want, opts.Image)
			}
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestOptionsProblems: every bad option is reported together, by name.
func TestOptionsProblems(t *testing.T) {
	_, err := docker.New(docker.Options{
		Study:         "no/slash",
		Network:       "none",
		GPUs:          "some",
		Pull:          "sometimes",
		ModelBasePath: "models/m",
		GRPCPort:      -1,
		Mounts:        []docker.Mount{{Source: "relative", Target: "models"}},
		Env:           []string{"NOVALUE"},
		Args:          []string{"--batching_parameters_file=/x"},
	})
	if err == nil {
		t.Fatal("New: got nil error")
	}
	for _, want := range []string{
		"study:", "image: required", `network: "none" leaves the server's ports unreachable`,
		`gpus: want "all", a count or "device=0,1", got "some"`, `pull: want "missing", "always" or "never", got "sometimes"`,
		`model_base_path: must be an absolute path inside the container, got "models/m"`, "model_base_path: needs model_name",
		"grpc_port: must be in 0..65535, got -1", `mounts[0].source: must be an absolute host path, got "relative"`,
		`mounts[0].target: must be an absolute container path, got "models"`, `env[0]: want NAME=value, got "NOVALUE"`,
		"args[0]: --batching_parameters_file",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// BenchmarkRestart measures a trial restart on the docker runtime (stop
// and remove the previous container, create and start one, both ports
// answering through the published ports):
//
//	DOCKER_HOST=$(.ci/engine-up) go test -run '^$' -bench Restart -benchtime 20x ./tuner/runtime/docker/
func BenchmarkRestart(b *testing.B) {
	b.Run("server=fake", func(b *testing.B) {
		benchOn(b, newRuntime(b, fakeOptions(b, b.TempDir())), runtime.Config{Batching: testenv.GoodBatching})
	})
	b.Run("server=stand-in", func(b *testing.B) {
		cli := engine(b)
		si := testenv.StandIn(b, testenv.RepoRoot(b))
		if _, err := cli.ImageInspect(context.Background(), si.Image); err != nil {
			testenv.Unavailable(b, "stand-in image %s: %v (run make image)", si.Image, err)
		}
		dir := b.TempDir()
		benchOn(b, newRuntime(b, docker.Options{Client: cli, Study: studyFor(dir), StateDir: dir, Image: si.Image, ModelName: si.Model, StopGrace: 2 * time.Second}), runtime.Config{Batching: si.Good})
	})
}

func benchOn(b *testing.B, rt runtime.Runtime, cfg runtime.Config) {
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Restore(ctx)
	runtimetest.BenchRestart(b, rt, cfg)
}

// cutProxy forwards a unix socket to the engine's until Cut, which closes
// the listener and every connection: an engine that goes away mid-study.
type cutProxy struct {
	path  string
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, engineSock string) *cutProxy {
	p := &cutProxy{path: filepath.Join(t.TempDir(), "engine.sock")}
	l, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.l = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e, err := net.Dial("unix", engineSock)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, e)
			p.mu.Unlock()
			go func() { io.Copy(e, c); e.Close() }()
			go func() { io.Copy(c, e); c.Close() }()
		}
	}()
	t.Cleanup(p.Cut)
	return p
}

func (p *cutProxy) Cut() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestEngineGoesAway: the engine stops answering while a trial runs. Stop
// and Restore fail promptly with ErrEngineUnreachable instead of waiting on
// an engine that is gone, and the next Recover, with the engine back,
// removes the trial container that was left.
func TestEngineGoesAway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	real := engine(t)
	sock, ok := strings.CutPrefix(real.DaemonHost(), "unix://")
	if !ok {
		t.Skipf("needs a unix-socket engine, have %s", real.DaemonHost())
	}
	proxy := newCutProxy(t, sock)
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+proxy.path), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	dir := t.TempDir()
	opts := fakeOptions(t, dir)
	opts.Client = cli
	rt := newRuntime(t, opts)
	ctx := context.Background()
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
	proxy.Cut()

	began := time.Now()
	err = srv.Stop(ctx)
	if !errors.Is(err, docker.ErrEngineUnreachable) {
		t.Errorf("Stop with the engine gone: got %v, want ErrEngineUnreachable", err)
	}
	select {
	case <-srv.Done():
	default:
		t.Error("Done not closed after Stop gave up on the engine")
	}
	if e := srv.Exit(); !e.Stopped || !strings.Contains(e.Detail, "engine") {
		t.Errorf("Exit: got %+v, want Stopped with the engine named in Detail", e)
	}
	if err := rt.Restore(ctx); !errors.Is(err, docker.ErrEngineUnreachable) {
		t.Errorf("Restore with the engine gone: got %v, want ErrEngineUnreachable", err)
	}
	// Far below the 30 s the engine would have been waited for.
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("Stop and Restore took %v with the engine gone", took)
	}
	if left := trialContainers(t, studyFor(dir)); len(left) != 1 {
		t.Fatalf("want the one trial container left behind, got %q", left)
	}

	// The engine is back (the real client): the next run cleans up.
	opts.Client = real
	again := newRuntime(t, opts)
	if err := again.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	defer again.Restore(ctx)
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("left after Recover: %q", left)
	}
}
