package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/batchtune/batchtune/tuner/runtime/internal/owner"
)

// Orphan is a trial pod or ConfigMap whose batchtune is gone.
type Orphan struct {
	Kind  string // "pod" or "configmap"
	Name  string
	Study string // the study as batchtune named it
	Owner string // the owner annotation: pid@host or pod/namespace/name/uid
	Phase string // a pod's phase
}

// Orphans lists, in namespace ns, every batchtune trial pod and ConfigMap
// (of any study) whose owner is gone, by the same rule a study's next run
// applies (a pid that no longer runs on this host; a batchtune pod that no
// longer exists, or has ended), and removes them when remove is set.
// Objects of a live batchtune, or of one on another host that cannot be
// checked, are left alone.
func Orphans(ctx context.Context, cli kubernetes.Interface, ns string, remove bool) ([]Orphan, error) {
	sel := metav1.ListOptions{LabelSelector: labels.Set{LabelRole: RoleTrial}.String()}
	pods, err := cli.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: listing trial pods in namespace %s: %w", ns, err)
	}
	cms, err := cli.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: listing trial ConfigMaps in namespace %s: %w", ns, err)
	}
	self, _ := owner.Self()
	if p, ok := owner.SelfPod(); ok {
		self = p.Label()
	}
	host, _ := os.Hostname()
	gone := ownerGone(ctx, cli, self, host)
	var out []Orphan
	var errs []error
	zero := int64(0)
	for _, p := range pods.Items {
		if ok, _ := gone(p.Annotations[AnnotationOwner]); !ok {
			continue
		}
		out = append(out, Orphan{Kind: "pod", Name: p.Name, Study: p.Annotations[AnnotationStudy], Owner: p.Annotations[AnnotationOwner], Phase: string(p.Status.Phase)})
		if remove {
			err := cli.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("kubernetes: deleting pod %s: %w", p.Name, err))
			}
		}
	}
	for _, c := range cms.Items {
		if ok, _ := gone(c.Annotations[AnnotationOwner]); !ok {
			continue
		}
		out = append(out, Orphan{Kind: "configmap", Name: c.Name, Study: c.Annotations[AnnotationStudy], Owner: c.Annotations[AnnotationOwner]})
		if remove {
			err := cli.CoreV1().ConfigMaps(ns).Delete(ctx, c.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("kubernetes: deleting ConfigMap %s: %w", c.Name, err))
			}
		}
	}
	return out, errors.Join(errs...)
}
