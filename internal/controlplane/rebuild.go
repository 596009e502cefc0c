package controlplane

// What a cluster needs between two builds of the same stack, as a rebuilt cluster would start.

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// inGroup says whether a CRD's group is group or one of its subgroups: a release's CRDs come in
// both (External Secrets' external-secrets.io and generators.external-secrets.io).
func inGroup(crdGroup, group string) bool {
	return crdGroup == group || strings.HasSuffix(crdGroup, "."+group)
}

// WaitPodsGone waits (up to two minutes) until namespace ns has no pod, as a rebuilt cluster
// starts without the last install's. An uninstall returns while its pods still terminate: External
// Secrets' cert-controller (no leader election in its chart) then runs beside the new one, both
// write the webhook's CA, and a webhook configuration can be left with the one that lost, refused
// by the API server (`x509: certificate signed by unknown authority`) until the winner's next
// reconcile, five minutes later.
func (cp *ControlPlane) WaitPodsGone(ctx context.Context, ns string) error {
	var left []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods of namespace %s still there after two minutes: %s", ns, strings.Join(left, ", "))
		}
	}
}

// WaitCRDCaches waits (up to a minute per CRD) until the API server lists the objects of every
// CRD of group (and its subgroups) from its watch cache (resourceVersion=0). The CRD finalizer needs that cache: a
// CRD deleted while it still starts stays Terminating until the finalizer's backoff retries
// (minutes on a loaded machine), and a Helm release that deletes it then times out uninstalling.
func (cp *ControlPlane) WaitCRDCaches(ctx context.Context, group string) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	crds, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range crds.Items {
		g, _, _ := unstructured.NestedString(c.Object, "spec", "group")
		if !inGroup(g, group) {
			continue
		}
		plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
		version := ""
		for _, v := range versions {
			if vm, ok := v.(map[string]any); ok && vm["storage"] == true {
				version, _ = vm["name"].(string)
			}
		}
		gvr := schema.GroupVersionResource{Group: g, Version: version, Resource: plural}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1}); err == nil {
				break
			} else if time.Now().After(deadline) {
				return fmt.Errorf("%s: objects not listed from the cache after a minute: %w", c.GetName(), err)
			}
		}
	}
	return nil
}

// WaitCRDsGone waits (up to two minutes) until no CRD of group (or its subgroups) is left, as a rebuilt cluster
// starts without them. A release that deletes its CRDs on uninstall returns while they are
// still Terminating (the finalizer deletes their objects first): a reinstall meanwhile finds
// them there, and once their deletion ends the new release lacks them (HelmReleaseReady then
// rightly waits for a CRD that is "not found").
func (cp *ControlPlane) WaitCRDsGone(ctx context.Context, group string) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	var left []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		crds, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left = left[:0]
		for _, c := range crds.Items {
			if g, _, _ := unstructured.NestedString(c.Object, "spec", "group"); inGroup(g, group) {
				left = append(left, c.GetName())
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRDs of %s still there after two minutes: %s", group, strings.Join(left, ", "))
		}
	}
}

// DropLeases deletes the leader-election Leases in ns whose names start with prefix, as a
// rebuilt cluster starts without them. cert-manager v1.11 keeps its Leases after an uninstall
// (its pods do not release them on shutdown); a reinstall within their 60 s leaseDuration
// waits them out, and the cainjector injects the webhook's CA only after that: meanwhile every
// cert-manager object fails admission with `x509: certificate signed by unknown authority`,
// and the chart's startupapicheck hook (1 minute) can fail the release.
func (cp *ControlPlane) DropLeases(ctx context.Context, ns, prefix string) error {
	leases, err := cp.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, prefix) {
			if err := cp.Client.CoordinationV1().Leases(ns).Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}
