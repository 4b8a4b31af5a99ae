package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batchtune/batchtune/tfserving"
)

// imageRef is what `make image` builds.
const imageRef = "localhost/tfs-emulator:dev"

// engineRequired reports whether a missing engine or image must fail the
// test (CI sets BATCHTUNE_ENGINE=required) rather than skip it.
func engineRequired() bool { return os.Getenv("BATCHTUNE_ENGINE") == "required" }

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if engineRequired() {
		t.Fatalf(format+" (BATCHTUNE_ENGINE=required)", args...)
	}
	t.Skipf(format+" (set BATCHTUNE_ENGINE=required to make this a failure)", args...)
}

// dockerHost is $DOCKER_HOST, or what .ci/engine-up prints (it starts the
// engine when it is installed but not running).
func dockerHost(t *testing.T) string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	script := filepath.Join("..", "..", ".ci", "engine-up")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		unavailable(t, "no container engine: %s: %v: %s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestImageServesPredict runs the stand-in image on the real container
// engine (podman's Docker-compatible API, through the Docker Go client),
// the way TF Serving's image is run, and gets a Predict answer through a
// mapped port.
func TestImageServesPredict(t *testing.T) {
	host := dockerHost(t)
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		unavailable(t, "docker client for %s: %v", host, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		unavailable(t, "engine at %s does not answer: %v", host, err)
	}
	if _, err := cli.ImageInspect(ctx, imageRef); err != nil {
		unavailable(t, "image %s is missing (run make image): %v", imageRef, err)
	}

	grpcPort := nat.Port("8500/tcp")
	restPort := nat.Port("8501/tcp")
	created, err := cli.ContainerCreate(ctx,
		&container.Config{
			Image:        imageRef,
			Env:          []string{"MODEL_NAME=ranker"},
			Cmd:          []string{"--enable_batching", "--max_num_load_retries=0"},
			ExposedPorts: nat.PortSet{grpcPort: {}, restPort: {}},
		},
		&container.HostConfig{PortBindings: nat.PortMap{
			grpcPort: {{HostIP: "127.0.0.1", HostPort: ""}},
			restPort: {{HostIP: "127.0.0.1", HostPort: ""}},
		}},
		nil, nil, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		if err := cli.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove %s: %v", created.ID, err)
		}
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	logs := func() string {
		r, err := cli.ContainerLogs(context.Background(), created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			return err.Error()
		}
		defer r.Close()
		var out bytes.Buffer
		if _, err := stdcopy.StdCopy(&out, &out, r); err != nil && !errors.Is(err, io.EOF) {
			b, _ := io.ReadAll(r)
			return out.String() + string(b)
		}
		return out.String()
	}
	info, err := cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	mapped := func(p nat.Port) string {
		for _, b := range info.NetworkSettings.Ports[p] {
			if b.HostPort != "" {
				return "127.0.0.1:" + b.HostPort
			}
		}
		t.Fatalf("port %s not mapped: %v", p, info.NetworkSettings.Ports)
		return ""
	}
	grpcAddr, restAddr := mapped(grpcPort), mapped(restPort)

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	features := make([]float32, 256)
	for i := range features {
		features[i] = float32(i%7) / 7
	}
	req := &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: "ranker"},
		Inputs: map[string]*tfserving.TensorProto{"features": {
			Dtype:       tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 1}, {Size: 256}}},
			FloatVal:    features,
		}},
	}
	pc := tfserving.NewPredictionServiceClient(conn)
	var resp *tfserving.PredictResponse
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err = pc.Predict(rctx, req)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no Predict answer through %s: %v\ncontainer log:\n%s", grpcAddr, err, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	scores := resp.GetOutputs()["scores"].GetFloatVal()
	if len(scores) != 1 || scores[0] <= 0 || scores[0] >= 1 {
		t.Errorf("scores = %v, want one value in (0, 1)", scores)
	}
	if v := resp.GetModelSpec().GetVersion().GetValue(); v != 1 {
		t.Errorf("answer from version %d, want 1", v)
	}
	// The REST port is mapped too, and says AVAILABLE.
	hresp, err := http.Get("http://" + restAddr + "/v1/models/ranker")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if hresp.StatusCode != 200 || !strings.Contains(string(body), `"AVAILABLE"`) {
		t.Errorf("REST status: HTTP %d %s", hresp.StatusCode, body)
	}
	// The image's entrypoint built TF's command line from MODEL_NAME.
	if l := logs(); !strings.Contains(l, "model_base_path=/models/ranker") {
		t.Errorf("container log lacks the entrypoint's model_base_path=/models/ranker:\n%s", l)
	}
}
