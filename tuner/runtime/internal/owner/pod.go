package owner

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The environment through which a pod's spec tells batchtune which pod it
// is (the downward API: fieldRef metadata.name, metadata.namespace,
// metadata.uid). With all three set, batchtune's owner is that pod.
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
	EnvPodUID       = "POD_UID"
)

// podPrefix starts an owner label that names a pod: pod/namespace/name/uid.
const podPrefix = "pod/"

// Pod names a batchtune that runs in a pod.
type Pod struct {
	Namespace, Name, UID string
}

// Label is the pod's owner label, pod/namespace/name/uid: a pod's new
// incarnation (a new UID) is another owner, and the label holds what the
// API needs to look the pod up.
func (p Pod) Label() string {
	return podPrefix + p.Namespace + "/" + p.Name + "/" + p.UID
}

// SelfPod returns the pod this process runs in, from EnvPodName,
// EnvPodNamespace and EnvPodUID; ok is false unless all three are set
// (and hold no '/'), as outside a pod.
func SelfPod() (p Pod, ok bool) {
	p = Pod{Namespace: os.Getenv(EnvPodNamespace), Name: os.Getenv(EnvPodName), UID: os.Getenv(EnvPodUID)}
	for _, s := range []string{p.Namespace, p.Name, p.UID} {
		if s == "" || strings.Contains(s, "/") {
			return Pod{}, false
		}
	}
	return p, true
}

// ParsePod reads an owner label made by Pod.Label.
func ParsePod(label string) (Pod, bool) {
	rest, ok := strings.CutPrefix(label, podPrefix)
	if !ok {
		return Pod{}, false
	}
	f := strings.Split(rest, "/")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return Pod{}, false
	}
	return Pod{Namespace: f[0], Name: f[1], UID: f[2]}, true
}

// PodState is what the API says of a pod by its namespace and name.
type PodState struct {
	// Exists is false when the API has no such pod.
	Exists bool
	UID    string
	// Phase is the pod's status.phase: Pending, Running, Succeeded,
	// Failed, Unknown.
	Phase string
	// DeleteBy is the pod's metadata.deletionTimestamp (when its grace
	// period ends); zero when it is not being deleted.
	DeleteBy time.Time
}

// PodLookup asks the API about a pod (the kubernetes runtime's client in
// production, a fake in tests); an error means the pod could not be
// checked.
type PodLookup func(namespace, name string) (PodState, error)

// CheckAny is Check extended to owner labels that name a pod (see
// Pod.Label), whose liveness lookup gives: the pod is live while the API
// has it with the label's UID, in a phase other than Succeeded or Failed,
// and not past the end of its deletion's grace period (now). A pod whose
// lookup fails counts as live and unchecked. Labels pid@host are read as
// Check reads them.
func CheckAny(label, self, host string, alive func(pid int) bool, lookup PodLookup, now time.Time) Verdict {
	if label == "" || label == self {
		return Verdict{Gone: true}
	}
	p, ok := ParsePod(label)
	if !ok {
		return Check(label, self, host, alive)
	}
	v := Verdict{Pod: p.Namespace + "/" + p.Name}
	st, err := lookup(p.Namespace, p.Name)
	switch {
	case err != nil:
		v.Unchecked = err.Error()
		return v
	case !st.Exists, st.UID != p.UID,
		st.Phase == "Succeeded", st.Phase == "Failed",
		!st.DeleteBy.IsZero() && !now.Before(st.DeleteBy):
		return Verdict{Gone: true}
	}
	return v
}

// podString describes a live owner pod.
func (v Verdict) podString() string {
	if v.Unchecked != "" {
		return fmt.Sprintf("pod %s (not checked: %s)", v.Pod, v.Unchecked)
	}
	return "pod " + v.Pod
}
