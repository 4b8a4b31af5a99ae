// Package kubernetes is the runtime that runs each trial's TF Serving as a
// pod on a Kubernetes cluster, through client-go.
//
// A trial pod is made from the study's template (a Pod or pod template as
// in a manifest: image, model volume, resources such as nvidia.com/gpu,
// node selector, affinity, tolerations, service account, namespace). Each
// Start writes the trial's batching.config and monitoring config into a
// ConfigMap, mounts it read-only at /batchtune in the TF Serving container,
// appends the trial's flags (--batching_parameters_file=/batchtune/...) to
// the container's args, and creates the pod with restartPolicy Never: a
// server that dies is a failed trial, not a restart. Start returns once the
// container runs (or has already ended); the probe then reaches the server
// at the pod's IP, and the tuner waits for the model to be AVAILABLE as for
// any runtime. Where pod IPs do not route from batchtune's host, the first
// Start says so and refuses: measuring through a port-forward would distort
// every latency.
//
// Kubernetes' failures are trial failures carrying its reason, never a
// hang: a pod still Pending after Options.PendingTimeout (with the
// scheduler's message, e.g. no node has the GPU), ImagePullBackOff,
// ErrImageNeverPull, CrashLoopBackOff, CreateContainerConfigError and the
// like fail Start; a container that exits, is killed or OOMKilled ends the
// Server with its exit code, Kubernetes' reason and the tail of its log;
// an API call that is forbidden (RBAC) fails with the API's message.
//
// Pods and ConfigMaps carry the labels batchtune.io/study, batchtune.io/run
// (one per runtime: a batchtune process) and batchtune.io/role=trial, and
// the annotation batchtune.io/owner: pid@host, or, when batchtune runs in
// a pod that tells it POD_NAME, POD_NAMESPACE and POD_UID (the downward
// API), pod/namespace/name/uid. Recover collects what a batchtune that is
// gone left behind in the namespace (its owner's pid no longer runs on this
// host; its owner pod is missing, has another UID, has Succeeded or Failed,
// or is past its deletion's grace period, as the API says) and refuses,
// with runtime.ErrBusy, a study whose pods belong to a live batchtune
// elsewhere, or to an owner pod it may not get; those are never touched.
// The study's state directory holds only its lock, which keeps two
// batchtunes on one host from running the same study.
package kubernetes
