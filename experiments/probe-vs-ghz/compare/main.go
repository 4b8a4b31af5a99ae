// Command compare is the driver of the probe-vs-ghz experiment (see
// ../README.md; run it through ../run.sh). It starts one tfs-emulator,
// warms it, then runs ghz and `batchtune probe` against it in turn at the
// same concurrency and connections, rounds interleaved (the order flips
// every round), and prints each run's requests, QPS and client CPU per
// request, the last taken from the child's own rusage. Then it checks the
// open-loop rate accuracy at fractions of the closed-loop maximum.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batchtune/batchtune/probe"
	"github.com/batchtune/batchtune/tfserving"
)

type config struct {
	ghz, batchtune, emulator, root, out string
	model, modelBase                    string
	rounds, concurrency, connections    int
	duration, openDuration              time.Duration
	fractions                           string
	grpcThreads                         int
}

func main() {
	var c config
	flag.StringVar(&c.ghz, "ghz", "", "ghz binary")
	flag.StringVar(&c.batchtune, "batchtune", "", "batchtune binary")
	flag.StringVar(&c.emulator, "emulator", "", "tfs-emulator binary")
	flag.StringVar(&c.root, "root", ".", "repository root (protos, bundled models)")
	flag.StringVar(&c.out, "out", "out", "directory for configs, payload, logs and raw results")
	flag.StringVar(&c.model, "model", "ranker", "model name")
	flag.StringVar(&c.modelBase, "model-base", "", "model base path (default: ROOT/configs/models/MODEL)")
	flag.IntVar(&c.rounds, "rounds", 5, "interleaved rounds")
	flag.IntVar(&c.concurrency, "concurrency", 64, "closed-loop concurrency")
	flag.IntVar(&c.connections, "connections", 4, "gRPC connections")
	flag.DurationVar(&c.duration, "duration", 15*time.Second, "length of each closed-loop run")
	flag.DurationVar(&c.openDuration, "open-duration", 10*time.Second, "length of each open-loop run")
	flag.StringVar(&c.fractions, "open-fractions", "0.1,0.3,0.5,0.7", "open-loop rates as fractions of the closed-loop maximum")
	flag.IntVar(&c.grpcThreads, "grpc-max-threads", 256, "stand-in's --grpc_max_threads (its default, 4 x cores, caps any client)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// sample is one run of one tool.
type sample struct {
	tool       string
	round      int
	requests   int64
	qps        float64
	clientCPU  time.Duration // child's user+system time (rusage)
	serverCPU  time.Duration // stand-in's CPU over the run (/proc)
	p99        time.Duration // as the tool reports it
	errors     int64
	statusNote string
}

func (s sample) cpuPerReq() time.Duration { return s.clientCPU / time.Duration(max(s.requests, 1)) }
func (s sample) srvPerReq() time.Duration { return s.serverCPU / time.Duration(max(s.requests, 1)) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func run(c config) error {
	for _, p := range []string{c.ghz, c.batchtune, c.emulator} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("binary: %w", err)
		}
	}
	if c.modelBase == "" {
		c.modelBase = filepath.Join(c.root, "configs", "models", c.model)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	batching := filepath.Join(c.out, "batching.config")
	monitoring := filepath.Join(c.out, "monitoring.config")
	// Batches up to 64 so that 64 requests in flight can share them; two
	// batch threads for two cores.
	if err := os.WriteFile(batching, []byte("max_batch_size { value: 64 }\nbatch_timeout_micros { value: 1000 }\nmax_enqueued_batches { value: 64 }\nnum_batch_threads { value: 2 }\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(monitoring, []byte("prometheus_config {\n  enable: true\n  path: \"/monitoring/prometheus/metrics\"\n}\n"), 0o644); err != nil {
		return err
	}
	gport, err := freePort()
	if err != nil {
		return err
	}
	rport, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", gport)
	log, err := os.Create(filepath.Join(c.out, "emulator.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	emuArgs := []string{"--port=" + strconv.Itoa(gport), "--rest_api_port=" + strconv.Itoa(rport), "--model_name=" + c.model,
		"--model_base_path=" + c.modelBase, "--enable_batching",
		"--batching_parameters_file=" + batching, "--monitoring_config_file=" + monitoring,
		"--grpc_max_threads=" + strconv.Itoa(c.grpcThreads)}
	emu := exec.Command(c.emulator, emuArgs...)
	emu.Stdout, emu.Stderr = log, log
	if err := emu.Start(); err != nil {
		return err
	}
	defer func() {
		_ = emu.Process.Signal(syscall.SIGTERM)
		_ = emu.Wait()
	}()
	target := probe.Target{Addr: addr, Model: c.model}
	if err := probe.WaitReady(ctx, target, time.Minute, nil); err != nil {
		return err
	}
	payload, err := writePayload(ctx, target, filepath.Join(c.out, "request.json"))
	if err != nil {
		return err
	}

	fmt.Printf("probe-vs-ghz, %s, %d CPUs, load average %s\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), loadavg())
	fmt.Printf("stand-in: tfs-emulator %s\n", strings.Join(emuArgs[2:], " "))
	if b, err := os.ReadFile(filepath.Join(c.modelBase, "1", "model.json")); err == nil {
		var m struct {
			Description string `json:"description"`
		}
		if json.Unmarshal(b, &m) == nil {
			fmt.Printf("model %s: %s\n", c.model, m.Description)
		}
	}
	fmt.Printf("batching.config: max_batch_size 64, batch_timeout_micros 1000, max_enqueued_batches 64, num_batch_threads 2\n")
	fmt.Printf("load: closed loop, concurrency %d over %d connections, %s per run, %d rounds interleaved, payload %s\n\n",
		c.concurrency, c.connections, c.duration, c.rounds, filepath.Base(payload))

	// Warm the server (cold starts per batch size) outside every figure.
	warm := probeArgs(c, addr, payload, 5*time.Second)
	if _, _, err := runTool(c.batchtune, warm); err != nil {
		return fmt.Errorf("warming run: %w", err)
	}

	var samples []sample
	fmt.Printf("%-5s %-6s %9s %9s %12s %12s %14s %10s %s\n", "round", "tool", "requests", "QPS", "client CPU", "CPU/request", "server CPU/req", "p99", "errors")
	for r := 1; r <= c.rounds; r++ {
		order := []string{"ghz", "probe"}
		if r%2 == 0 {
			order = []string{"probe", "ghz"}
		}
		for _, tool := range order {
			s, err := closedRun(c, tool, r, addr, payload, emu.Process.Pid)
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r, tool, err)
			}
			samples = append(samples, s)
			fmt.Printf("%-5d %-6s %9d %9.1f %11.2fs %10.1fµs %12.1fµs %10s %d%s\n", s.round, s.tool, s.requests, s.qps,
				s.clientCPU.Seconds(), us(s.cpuPerReq()), us(s.srvPerReq()), s.p99.Round(100*time.Microsecond), s.errors, s.statusNote)
		}
	}
	med := func(tool string, f func(sample) float64) float64 {
		var xs []float64
		for _, s := range samples {
			if s.tool == tool {
				xs = append(xs, f(s))
			}
		}
		slices.Sort(xs)
		if len(xs) == 0 {
			return 0
		}
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	qps := func(s sample) float64 { return s.qps }
	cpu := func(s sample) float64 { return us(s.cpuPerReq()) }
	srv := func(s sample) float64 { return us(s.srvPerReq()) }
	gq, pq := med("ghz", qps), med("probe", qps)
	gc, pc := med("ghz", cpu), med("probe", cpu)
	fmt.Printf("\nmedian ghz:   QPS %.1f, client CPU %.1fµs/request, server CPU %.1fµs/request\n", gq, gc, med("ghz", srv))
	fmt.Printf("median probe: QPS %.1f, client CPU %.1fµs/request, server CPU %.1fµs/request\n", pq, pc, med("probe", srv))
	fmt.Printf("probe/ghz:    client CPU per request %.2f× (target <= 0.45: %s), QPS %.2f× (target >= 1.8: %s)\n",
		pc/gc, verdict(pc/gc <= 0.45), pq/gq, verdict(pq/gq >= 1.8))
	s := med("probe", srv)
	fmt.Printf("QPS ceiling if the box were CPU-bound: (server %.0f + ghz %.0f) / (server %.0f + probe %.0f) = %.2f×\n",
		s, gc, s, pc, (s+gc)/(s+pc))

	// Open loop: rates up to 70% of the closed-loop maximum.
	maxQPS := pq
	fmt.Printf("\nopen loop, %s per rate, closed-loop maximum %.1f req/s (median probe QPS above)\n", c.openDuration, maxQPS)
	fmt.Printf("%-8s %9s %9s %9s %10s %10s %6s %10s %10s\n", "fraction", "target", "sent", "achieved", "sent err", "ach. err", "valid", "lag p99", "p99")
	for _, fs := range strings.Split(c.fractions, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(fs), 64)
		if err != nil {
			return fmt.Errorf("--open-fractions: %w", err)
		}
		rate := f * maxQPS
		args := []string{"probe", "--target", addr, "--model", c.model, "--rate", strconv.FormatFloat(rate, 'f', 1, 64),
			"--connections", strconv.Itoa(c.connections), "--request-file", payload, "--no-warmup", "--ready-timeout", "0",
			"--min-duration", c.openDuration.String(), "--max-duration", c.openDuration.String(), "--no-metrics", "--json", "--quiet"}
		out, _, err := runTool(c.batchtune, args)
		if err != nil {
			return fmt.Errorf("open loop at %.1f/s: %w", rate, err)
		}
		_ = os.WriteFile(filepath.Join(c.out, fmt.Sprintf("open-%.2f.json", f)), out, 0o644)
		var res probe.Result
		if err := json.Unmarshal(out, &res); err != nil {
			return err
		}
		target := res.OfferedRate
		sentErr, achErr := res.SentRate/target-1, res.QPS/target-1
		fmt.Printf("%-8.2f %9.1f %9.1f %9.1f %+9.2f%% %+9.2f%% %6v %10s %10s %s\n", f, target, res.SentRate, res.QPS, 100*sentErr, 100*achErr,
			res.Valid, res.Generator.LagP99.Round(10*time.Microsecond), res.Latency.P99.Round(100*time.Microsecond),
			verdict(abs(sentErr) <= 0.01 && abs(achErr) <= 0.01)+" "+res.InvalidReason)
	}
	fmt.Printf("\nload average at the end: %s\n", loadavg())
	return nil
}

func probeArgs(c config, addr, payload string, d time.Duration) []string {
	return []string{"probe", "--target", addr, "--model", c.model, "--concurrency", strconv.Itoa(c.concurrency),
		"--connections", strconv.Itoa(c.connections), "--request-file", payload, "--ready-timeout", "0",
		"--min-duration", d.String(), "--max-duration", d.String(), "--no-metrics", "--json", "--quiet"}
}

func closedRun(c config, tool string, round int, addr, payload string, emuPID int) (sample, error) {
	s := sample{tool: tool, round: round}
	var args []string
	bin := c.batchtune
	if tool == "ghz" {
		bin = c.ghz
		args = []string{"--insecure", "--proto", filepath.Join(c.root, "tfserving", "proto", "serving.proto"), "--import-paths", c.root,
			"--call", "tensorflow.serving.PredictionService/Predict", "-D", payload,
			"-c", strconv.Itoa(c.concurrency), "--connections", strconv.Itoa(c.connections), "-z", c.duration.String(),
			"--format", "json", addr}
	} else {
		// The server is warm: no warmup, so every request the process
		// sends is counted, as with ghz.
		args = append(probeArgs(c, addr, payload, c.duration), "--no-warmup")
	}
	srv0 := procCPU(emuPID)
	out, cpu, err := runTool(bin, args)
	s.serverCPU = procCPU(emuPID) - srv0
	s.clientCPU = cpu
	if err != nil {
		return s, err
	}
	_ = os.WriteFile(filepath.Join(c.out, fmt.Sprintf("round%d-%s.json", round, tool)), out, 0o644)
	if tool == "ghz" {
		var g struct {
			Count       int64            `json:"count"`
			RPS         float64          `json:"rps"`
			StatusCodes map[string]int64 `json:"statusCodeDistribution"`
			Latency     []struct {
				Percentage int           `json:"percentage"`
				Latency    time.Duration `json:"latency"`
			} `json:"latencyDistribution"`
		}
		if err := json.Unmarshal(out, &g); err != nil {
			return s, fmt.Errorf("ghz output: %w", err)
		}
		s.requests, s.qps = g.Count, g.RPS
		for code, n := range g.StatusCodes {
			if code != "OK" {
				s.errors += n
				s.statusNote += fmt.Sprintf(" %s×%d", code, n)
			}
		}
		for _, l := range g.Latency {
			if l.Percentage == 99 {
				s.p99 = l.Latency
			}
		}
		return s, nil
	}
	var r probe.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return s, fmt.Errorf("probe output: %w", err)
	}
	s.requests, s.qps, s.p99 = r.Requests, r.QPS, r.Latency.P99
	s.errors = r.Requests - r.OK
	for code, n := range r.Errors {
		s.statusNote += fmt.Sprintf(" %s×%d", code, n)
	}
	if !r.Valid {
		s.statusNote += " INVALID: " + r.InvalidReason
	}
	return s, nil
}

// runTool runs bin and returns its stdout and its CPU time (user+system,
// from the child's rusage).
func runTool(bin string, args []string) ([]byte, time.Duration, error) {
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return out, cpu, fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, cpu, nil
}

// writePayload builds one request for the model's signature with 256-ish
// float features in float_val (as a hand-written JSON payload has them)
// and writes it as protobuf JSON, which both tools read.
func writePayload(ctx context.Context, t probe.Target, path string) (string, error) {
	inputs, err := probe.DiscoverInputs(ctx, t)
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	req := &tfserving.PredictRequest{ModelSpec: &tfserving.ModelSpec{Name: t.Model, SignatureName: probe.DefaultSignature},
		Inputs: map[string]*tfserving.TensorProto{}}
	for _, in := range inputs {
		if in.DType != "DT_FLOAT" || len(in.Shape) == 0 || in.Shape[0] != -1 {
			return "", fmt.Errorf("input %s (%s %v): the driver generates only float inputs with a batch dimension", in.Name, in.DType, in.Shape)
		}
		shape := &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: 1}}}
		n := int64(1)
		for _, d := range in.Shape[1:] {
			shape.Dim = append(shape.Dim, &tfserving.TensorShapeProto_Dim{Size: d})
			n *= d
		}
		tp := &tfserving.TensorProto{Dtype: tfserving.DataType_DT_FLOAT, TensorShape: shape}
		for i := int64(0); i < n; i++ {
			tp.FloatVal = append(tp.FloatVal, rng.Float32())
		}
		req.Inputs[in.Name] = tp
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(req)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, b, 0o644)
}

// procCPU is a process's CPU time from /proc/PID/stat (utime+stime, in
// clock ticks of 1/100 s, USER_HZ on Linux); 0 where /proc is missing.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
