package configs

import (
	"bytes"
	"fmt"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultStudy returns a study with every key at its default: the one place
// the defaults are written down. A study file is decoded over it, so a key
// left out of the file keeps the value here. name,
// target.model.name and slo.latency have no default and must be given.
// configs/examples/reference.yaml shows this study key by key
// (ReferenceYAML), and a test keeps the two equal.
func DefaultStudy() *Study {
	i64 := func(v int64) *int64 { return &v }
	return &Study{
		Target: Target{
			Runtime:      RuntimeDocker,
			Model:        Model{Signature: "serving_default"},
			Ports:        Ports{}, // 0: free ports, picked per trial
			Flags:        []string{},
			StartTimeout: Duration(2 * time.Minute),
			Docker: DockerTarget{
				Env:  map[string]string{},
				Args: []string{},
				Pull: PullMissing,
			},
			Process: ProcessTarget{
				Binary: "tensorflow_model_server",
				Args:   []string{},
				Env:    map[string]string{},
			},
			Kubernetes: KubernetesTarget{
				Template:       map[string]any{},
				Args:           []string{},
				Spread:         SpreadNode,
				PendingTimeout: Duration(5 * time.Minute),
			},
		},
		Load: Load{
			Mode:           LoadClosed,
			Concurrency:    16,
			Arrival:        ArrivalConstant,
			Connections:    4,
			Transport:      TransportGRPC,
			RequestTimeout: Duration(10 * time.Second),
			Payload:        Payload{Batch: 1, Seed: 1, Inputs: []Input{}},
			Warmup:         Warmup{Requests: 100, UntilSettled: true, MaxDuration: Duration(30 * time.Second)},
			MinDuration:    Duration(10 * time.Second),
			MaxDuration:    Duration(60 * time.Second),
		},
		SLO:       SLO{Quantile: 0.99, ErrorRate: 0.001},
		Objective: ObjectiveMaxThroughput,
		// TF Serving's four batching knobs over ranges that suit most
		// models, and the intra- and inter-op thread pools (the mission's
		// six); batch_timeout_micros values over a third of the SLO are
		// rejected by the search before they run.
		Space: SpaceSpec{
			{Name: "max_batch_size", Min: i64(1), Max: i64(128), Scale: ScalePow2},
			{Name: "batch_timeout_micros", Values: []int64{0, 500, 1000, 2000, 5000, 10000, 20000}},
			{Name: "num_batch_threads", Min: i64(1), Max: i64(8), Scale: ScalePow2},
			{Name: "max_enqueued_batches", Min: i64(2), Max: i64(128), Scale: ScalePow2},
			// 0 lets TF choose (one thread per core); explicit counts up
			// to the machine's cores.
			{Name: "tensorflow_intra_op_parallelism", Values: []int64{0, 1, 2, 4, 8, 16, 32, 64}, UpToCores: true},
			{Name: "tensorflow_inter_op_parallelism", Values: []int64{0, 1, 2, 4, 8, 16, 32, 64}, UpToCores: true},
		},
		Search: Search{
			Strategy:    defaultStrategy(),
			Trials:      30,
			Seed:        1,
			Parallelism: 1,
			MaxFailures: 5,
			Settings:    map[string]any{},
		},
		Confirmation: Confirmation{TopK: 5, Repeats: 3, MaxRepeats: 6, Confidence: 0.95},
		Schedule: Schedule{
			TimeZone:             "UTC",
			Trials:               10,
			AcceptMargin:         0.05,
			DegradationThreshold: 0.10,
			Rollout:              []string{},
			RolloutTimeout:       Duration(5 * time.Minute),
			Verify:               defaultScheduleVerify(),
		},
	}
}

// fieldDocs documents every key of a study file by its field path. It is
// the text of reference.yaml's comments; a test fails when a key has none.
var fieldDocs = map[string]string{
	"name": "Required. Identifies the study in the store, the daemon's API and metrics:\nletters, digits, '.', '_' and '-', at most 64.",

	"target":            "The TF Serving that is tuned and how each trial restarts it.",
	"target.runtime":    "docker (Docker Engine API; DOCKER_HOST is honoured), process (a child process)\nor kubernetes (a pod per trial on a cluster).",
	"target.model":      "The served model.",
	"target.model.name": "Required. --model_name, and the model requests are sent to.",
	"target.model.base_path": "--model_base_path as the server sees it. process: a host path, required.\n" +
		"docker: a path inside the container; empty means /models/<model.name>\n(where docker.model_dir is mounted). Relative paths are relative to this file.",
	"target.model.signature": "signature_name of the requests.",
	"target.ports":           "Host-side ports batchtune reaches the server on; 0 picks free ones per trial,\nso trials never collide with a TF Serving already listening on 8500/8501.",
	"target.ports.grpc":      "gRPC port (--port inside, mapped from the host for docker).",
	"target.ports.rest":      "REST port (--rest_api_port); metrics are scraped from it.",
	"target.flags": "Extra tensorflow_model_server flags for every trial, as \"--name=value\".\n" +
		"Names are checked (TF Serving ignores unknown ones silently). Flags batchtune\nsets itself, and flags the space tunes, are refused here.",
	"target.start_timeout":         "Longest wait for a restarted server to report the model AVAILABLE.",
	"target.docker":                "runtime: docker. Exactly one of image and container.",
	"target.docker.image":          "Image to create one trial container from per trial.",
	"target.docker.container":      "Existing container to tune in place: its configuration is snapshotted\nand put back afterwards, also after a crash of batchtune.",
	"target.docker.model_dir":      "Host directory mounted read-only at model.base_path.",
	"target.docker.env":            "Environment of the container (NAME: value).",
	"target.docker.args":           "Appended verbatim to the container's command; not checked.",
	"target.docker.gpus":           "GPUs given to the container: \"\" (none), \"all\", a count, or \"device=0,1\".",
	"target.docker.network":        "Network mode: \"\" (engine default, ports published on 127.0.0.1), \"host\", or a network name.",
	"target.docker.pull":           "missing (pull when absent), always, or never.",
	"target.process":               "runtime: process.",
	"target.process.binary":        "tensorflow_model_server or a compatible server: a name looked up in PATH,\nor a path (relative to this file).",
	"target.process.args":          "Passed verbatim before the trial's flags; not checked.",
	"target.process.env":           "Added to batchtune's environment for the server (NAME: value).",
	"target.kubernetes":            "runtime: kubernetes. A pod per trial, made from template (and/or image).",
	"target.kubernetes.kubeconfig": "Kubeconfig file; empty means $KUBECONFIG, ~/.kube/config, or the pod's\nservice account when batchtune runs in the cluster.",
	"target.kubernetes.context":    "Kubeconfig context; empty means the current one.",
	"target.kubernetes.namespace":  "Namespace of the trial pods and ConfigMaps; empty means the template's,\nthen the kubeconfig context's, then default.",
	"target.kubernetes.template": "The trial pod: a Pod or pod template (metadata and spec) as in a manifest:\n" +
		"image, volumes with the model, resources (nvidia.com/gpu), nodeSelector,\naffinity, tolerations, serviceAccountName. Each trial adds its batching.config\n" +
		"(a ConfigMap mounted at /batchtune) and its flags to the TF Serving container's args.",
	"target.kubernetes.image":           "The TF Serving container's image (replaces the template's); with no\ntemplate, the pod is this image alone.",
	"target.kubernetes.container":       "Name of the TF Serving container in the template; empty means its only\ncontainer, or the one named tfserving.",
	"target.kubernetes.args":            "Appended to the TF Serving container's args before the trial's flags;\nnot checked.",
	"target.kubernetes.spread":          "How trial pods running at once (search.parallelism) are kept apart: node\n(never two on one node) or none (the scheduler places them by their resource\nrequests, e.g. a GPU each).",
	"target.kubernetes.pending_timeout": "Longest a trial pod may take to start its container (scheduling, image,\nvolumes); past it the trial fails with Kubernetes' reason.",
	"target.kubernetes.deployment":      "An existing Deployment to tune in place: not supported yet (refused);\ngive its pod template as template instead.",

	"load":                      "The fixed load every trial is measured under.",
	"load.mode":                 "closed (fixed concurrency) or open (fixed rate; latency counted from the\nintended send time).",
	"load.concurrency":          "mode: closed. Requests in flight.",
	"load.rate":                 "mode: open. Requests per second; required in open mode.",
	"load.arrival":              "mode: open. constant or poisson.",
	"load.connections":          "Connections (gRPC channels or HTTP connections) the load is spread over.",
	"load.transport":            "grpc or rest.",
	"load.request_timeout":      "Deadline of each request.",
	"load.payload":              "What each request carries: at most one of inputs, request_file and\nwarmup_file; with none, inputs are generated from the model's signature\n(GetModelMetadata).",
	"load.payload.batch":        "Size of the batch dimension of each generated request.",
	"load.payload.seed":         "Seed of the generated values.",
	"load.payload.inputs":       "Generated input tensors: [{name, dtype, shape}], as saved_model_cli shows them.",
	"load.payload.inputs.name":  "Input name in the signature.",
	"load.payload.inputs.dtype": "TF data type: DT_FLOAT, float or float32 style.",
	"load.payload.inputs.shape": "Shape, e.g. [-1, 224, 224, 3]: -1 first is the batch dimension (payload.batch),\nevery other size >= 1.",
	"load.payload.request_file": "A PredictRequest in JSON (protojson), sent as it is.",
	"load.payload.warmup_file":  "A TF Serving warmup file (assets.extra/tf_serving_warmup_requests);\nits PredictLog requests are replayed in turn.",
	"load.warmup":               "Excludes the cold start: at least requests requests, then (until_settled)\nuntil latency settles, never longer than max_duration.",
	"load.warmup.requests":      "Warmup requests sent at least.",
	"load.warmup.until_settled": "Then warm up until the latency of successive windows settles.",
	"load.warmup.max_duration":  "Longest warmup.",
	"load.min_duration":         "A trial measures until its figures are stable (3 one-second windows at the\nfewest), but at least min_duration",
	"load.max_duration":         "and at most max_duration. It stops sooner once it has certainly broken the SLO,\nor, a search trial under max_throughput, once its throughput is certainly\n(99.9%, over 3 windows at the fewest) below the best so far.",

	"slo":            "The service-level objective a configuration must meet to be feasible.",
	"slo.latency":    "Required. Latency bound of the quantile below, e.g. 80ms. batch_timeout_micros\nabove a third of it is rejected before it runs.",
	"slo.quantile":   "0.99 holds P99 to slo.latency.",
	"slo.error_rate": "Largest tolerated fraction of failed requests.",

	"objective": "What the study optimises:", // + each objective, fieldDoc

	"space": "Parameters tuned, in order, by TF Serving name: {values: [...]} or\n{min, max, scale: linear|log|pow2, step, points}; up_to_cores: true drops\nvalues above the machine's cores (0, TF's auto, stays). A space given here\nreplaces this default one entirely.",

	"search":              "How trials are proposed.",
	"search.strategy":     "The strategy that proposes trials:", // + the names, fieldDoc
	"search.trials":       "Trial budget of a one-shot run.",
	"search.seed":         "Seeds every random choice of the study.",
	"search.parallelism":  "Search trials run at once, from the strategy's batch suggestions; above 1\nonly with target.runtime kubernetes (a pod each, spread by\ntarget.kubernetes.spread); confirmation runs one at a time, on one node.",
	"search.max_failures": "Consecutive failed trials that stop the study.",
	"search.settings":     "Settings of the strategy; it rejects those it does not know.", // + each one's, fieldDoc

	"confirmation":               "Re-measures the best candidates and the baseline on fresh restarts,\ninterleaved, before recommending.",
	"confirmation.top_k":         "Candidates re-measured: the first in the strategy's ranking of the configurations the search measured feasible (bayes ranks by its models, the others by the measurements).",
	"confirmation.repeats":       "Measurements of each candidate and of the baseline.",
	"confirmation.max_repeats":   "Up to this many repeats in all where the first ones left the verdict open (a\nsplit SLO verdict, overlapping intervals of the two best); at most repeats\nmeans none. From 4 repeats on, one in three may break the SLO.",
	"confirmation.clean_repeats": "When above 0, a stricter verdict on the SLO: no repeat may break it, and the\nwinner must have met it in this many (the leader is re-measured until it\nhas). For a tight SLO, where a configuration may meet it in some restarts\nand not others. 0 keeps the verdict above.",
	"confirmation.baseline":      "The batching.config in production today; empty compares with TF Serving's\ndefaults.",
	"confirmation.confidence":    "Level of the gain's confidence interval.",

	"export":            "Where the recommendation is written (atomically).",
	"export.path":       "The recommended batching.config; empty means <name>.batching.config next to\nthis file.",
	"export.flags_path": "When set, the matching server flags, one a line.",

	"schedule":                       "Re-tuning by the daemon. An empty cron means on demand only.",
	"schedule.cron":                  "Five-field cron expression or descriptor (@daily), e.g. \"0 3 * * *\".",
	"schedule.time_zone":             "IANA time zone the cron expression is read in, or Local.",
	"schedule.trials":                "Budget of a warm-started scheduled run.",
	"schedule.accept_margin":         "Relative gain over the incumbent, with confidence, needed to replace it.",
	"schedule.degradation_threshold": "Relative loss of the incumbent since it was accepted that is reported.",
	"schedule.rollout":               "Command run after an accepted change (argv, no shell); the export path is\nappended as its last argument.",
	"schedule.rollout_timeout":       "Longest the rollout command may run.",
	"schedule.verify":                "Acceptance soak (batchtune verify) after an accepted change, before the\nrollout: the new configuration holds a rate for a duration; when the SLO's\nquantile breaks in any interval, errors pass the bound or the rate is not\nkept, the incumbent is kept and the reason recorded.",
	"schedule.verify.enabled":        "Run the soak.",
	"schedule.verify.duration":       "How long the rate is held.",
	"schedule.verify.interval":       "Length of each judged interval (whole seconds).",
	"schedule.verify.rate":           "Requests per second to hold; 0 means the recommendation's capacity lower\nbound x headroom (objective max_capacity only).",
	"schedule.verify.headroom":       "Share of the capacity lower bound held when rate is 0.",
	"schedule.verify.max_error_rate": "Largest error rate over the soak (0.0001 is 0.01%).",
}

// ReferenceYAML writes DefaultStudy as a commented YAML document that shows
// every key with its default. configs/examples/reference.yaml is its output.
func ReferenceYAML() []byte {
	root := &yaml.Node{Kind: yaml.MappingNode}
	refNode(root, reflect.ValueOf(DefaultStudy()).Elem(), "")
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root},
		HeadComment: "Every key of a study with its default. Generated from configs.DefaultStudy by\n" +
			"`go test ./configs -run TestReferenceYAML -update`; do not edit by hand.\n" +
			"A study file needs only the keys it changes; name, target.model.name and\n" +
			"slo.latency have no default."}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		panic("configs: reference study does not encode: " + err.Error())
	}
	if err := enc.Close(); err != nil {
		panic("configs: reference study does not encode: " + err.Error())
	}
	return b.Bytes()
}

// refNode appends the keys of struct v to mapping node m.
func refNode(m *yaml.Node, v reflect.Value, path string) {
	idx, names := fieldsOf(v.Type())
	for _, name := range names {
		field := join(path, name)
		fv := v.Field(idx[name])
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: name, HeadComment: fieldDoc(field)}
		var val *yaml.Node
		switch {
		case fv.Kind() == reflect.Struct && fv.Type() != durationType:
			val = &yaml.Node{Kind: yaml.MappingNode}
			refNode(val, fv, field)
		default:
			val = &yaml.Node{}
			if err := val.Encode(fv.Interface()); err != nil {
				panic(fmt.Sprintf("configs: %s does not encode: %v", field, err))
			}
			flowScalarLists(val)
		}
		m.Content = append(m.Content, key, val)
	}
}

// flowScalarLists writes empty collections and lists of scalars on one
// line ([], {}, [0, 500, 1000]).
func flowScalarLists(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		flat := n.Kind == yaml.SequenceNode
		for _, c := range n.Content {
			flowScalarLists(c)
			flat = flat && c.Kind == yaml.ScalarNode
		}
		if flat || len(n.Content) == 0 {
			n.Style = yaml.FlowStyle
		}
	}
}

// docPaths lists the field paths of every key of a study file, the keys of
// the space section excepted (space.go documents them): what fieldDocs must
// cover.
func docPaths() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		idx, names := fieldsOf(t)
		for _, name := range names {
			field := join(path, name)
			out = append(out, field)
			ft := t.Field(idx[name]).Type
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft != spaceSpecType {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != durationType {
				walk(ft, field)
			}
		}
	}
	walk(reflect.TypeFor[Study](), "")
	return out
}
