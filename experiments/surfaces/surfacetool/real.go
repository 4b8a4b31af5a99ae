package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/probe"
)

// realRun is one measurement of the real stand-in.
type realRun struct {
	Model          string  `json:"model"`
	Round          int     `json:"round"`
	Config         point   `json:"config"`
	Concurrency    int     `json:"concurrency,omitempty"`
	Rate           float64 `json:"rate,omitempty"`
	GRPCMaxThreads int     `json:"grpc_max_threads"`
	LoadAvg        string  `json:"loadavg"`
	Started        string  `json:"started"`

	Valid         bool             `json:"valid"`
	InvalidReason string           `json:"invalid_reason,omitempty"`
	Stop          string           `json:"stop"`
	QPS           float64          `json:"qps"`
	P50us         float64          `json:"p50_us"`
	P99us         float64          `json:"p99_us"`
	ErrorRate     float64          `json:"error_rate"`
	Errors        map[string]int64 `json:"errors,omitempty"`
	Requests      int64            `json:"requests"`
	OK            int64            `json:"ok"`
	DurationS     float64          `json:"duration_s"`
	MeanBatch     float64          `json:"mean_batch"`
	Batches       float64          `json:"batches"`
	// ServerCPUs is the stand-in process's CPU time over WindowS, the
	// wall time from just before Measure to just after it.
	ServerCPUs      float64 `json:"server_cpu_s"`
	WindowS         float64 `json:"window_s"`
	ClientCPUPerReq float64 `json:"client_cpu_per_req_us"`
	ClientCPUUtil   float64 `json:"client_cpu_util"`
	LoadFailed      bool    `json:"load_failed,omitempty"`
	Failure         string  `json:"failure,omitempty"`
}

// realCmd runs every configuration of a plan on a fresh stand-in process
// and measures it with the probe, appending one JSON line per run.
func realCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("real", flag.ContinueOnError)
	planPath := fs.String("plan", "", "plan file (JSON)")
	out := fs.String("o", "", "JSON Lines file to append runs to")
	bin := fs.String("bin", "bin/tfs-emulator", "the stand-in binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *planPath == "" || *out == "" {
		return fmt.Errorf("real: -plan and -o are required")
	}
	var p plan
	if err := readJSON(*planPath, &p); err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	work, err := os.MkdirTemp("", "surfacetool-real-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for round := 1; round <= p.Repeats; round++ {
		for _, c := range p.Configs {
			r, err := realTrial(ctx, *bin, work, &p, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Label, err)
			}
			r.Round = round
			fmt.Printf("%-10s round %d  load %-14s qps %8.1f  p99 %8.0fµs  err %.4f  batch %6.2f  server cpu %.2f cores  client %.0fµs/req  %s\n",
				c.Label, round, r.LoadAvg, r.QPS, r.P99us, r.ErrorRate, r.MeanBatch, r.ServerCPUs/r.WindowS, r.ClientCPUPerReq, validity(r))
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func validity(r *realRun) string {
	switch {
	case r.LoadFailed:
		return "LOAD FAILED: " + r.Failure
	case !r.Valid:
		return "INVALID: " + r.InvalidReason
	}
	return "valid"
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// procCPU is a process's user+system CPU time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// Fields after the command: state is [0]; utime and stime are the
	// 14th and 15th fields of the line, [11] and [12] here.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

// realTrial starts the stand-in with c, waits for it, warms it up and
// measures it once.
func realTrial(ctx context.Context, bin, work string, p *plan, c point) (*realRun, error) {
	r := &realRun{Model: filepath.Base(filepath.Clean(p.Model)), Config: c, Concurrency: p.Load.Concurrency, Rate: p.Load.Rate,
		GRPCMaxThreads: p.GRPCMaxThreads, LoadAvg: loadAverage(), Started: time.Now().UTC().Format(time.RFC3339)}
	cfg := filepath.Join(work, "batching.config")
	if err := os.WriteFile(cfg, configs.EncodeBatching(c.batching()), 0o644); err != nil {
		return nil, err
	}
	mon := filepath.Join(work, "monitoring.config")
	if err := os.WriteFile(mon, []byte(`prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }`+"\n"), 0o644); err != nil {
		return nil, err
	}
	gp, err := freePort()
	if err != nil {
		return nil, err
	}
	rp, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port=" + strconv.Itoa(gp), "--rest_api_port=" + strconv.Itoa(rp), "--model_name=" + r.Model,
		"--model_base_path=" + p.Model, "--enable_batching", "--batching_parameters_file=" + cfg,
		"--monitoring_config_file=" + mon, "--max_num_load_retries=0",
		"--tensorflow_intra_op_parallelism=" + strconv.Itoa(c.Intra), "--tensorflow_inter_op_parallelism=" + strconv.Itoa(c.Inter),
	}
	if p.GRPCMaxThreads > 0 {
		args = append(args, "--grpc_max_threads="+strconv.Itoa(p.GRPCMaxThreads))
	}
	logf, err := os.Create(filepath.Join(work, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// A server that exits before it is ready failed to load.
	rctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case err := <-exited:
			exited <- err
			cancel(fmt.Errorf("stand-in exited: %v", err))
		case <-rctx.Done():
		}
	}()
	target := probe.Target{Addr: fmt.Sprintf("127.0.0.1:%d", gp), RESTAddr: fmt.Sprintf("127.0.0.1:%d", rp), Model: r.Model}
	if err := probe.WaitReady(rctx, target, time.Minute, nil); err != nil {
		cancel(nil)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log, _ := os.ReadFile(logf.Name())
		r.LoadFailed = true
		r.Failure = lastLine(string(log))
		return r, nil
	}
	defer cancel(nil)
	cl, err := probe.New(rctx, target, nil)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	load := probe.Load{Concurrency: p.Load.Concurrency, Rate: p.Load.Rate, Poisson: p.Load.Poisson, MaxWorkers: p.Load.MaxWorkers}
	if _, err := cl.Warmup(rctx, load, nil); err != nil {
		return nil, fmt.Errorf("warmup: %w", err)
	}
	cpu0, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	w0 := time.Now()
	res, err := cl.Measure(rctx, load, &probe.MeasureOptions{MinDuration: time.Duration(p.MinDuration), MaxDuration: time.Duration(p.MaxDuration)})
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	cpu1, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	r.WindowS = time.Since(w0).Seconds()
	r.ServerCPUs = (cpu1 - cpu0).Seconds()
	r.Valid, r.InvalidReason, r.Stop = res.Valid, res.InvalidReason, string(res.StopReason)
	r.QPS, r.ErrorRate, r.Errors, r.Requests, r.OK = res.QPS, res.ErrorRate, res.Errors, res.Requests, res.OK
	r.P50us = float64(res.Latency.P50) / 1e3
	r.P99us = float64(res.Latency.P99) / 1e3
	r.DurationS = res.Duration.Seconds()
	r.MeanBatch, r.Batches = res.Server.MeanBatchSize, res.Server.Batches
	r.ClientCPUPerReq = float64(res.Generator.CPUPerRequest) / 1e3
	r.ClientCPUUtil = res.Generator.CPUUtil
	return r, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
