package main

// `make demo-realnode`: the same three runs on a real node, nothing played. cert-manager
// v1.11.5 and External Secrets v0.11.0 run as real pods built from their Go modules, from
// their real charts; ingress-nginx's chart runs as rendered, its webhook served by a stand-in
// pod (internal/charts/standin.go); the FailedMounts are the real kubelet's.

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// realNode holds what the runs on a real node share: the charts as installed, and the real
// kubelet's FailedMounts of the current run.
type realNode struct {
	cp                *controlplane.ControlPlane
	nginxC, esoC, cmC string
	mounts            *mountWatch
}

func (d *realNode) intro() []string {
	return []string{
		"002  an Ingress after ingress-nginx: its admission webhook (a stand-in pod: the controller needs nginx)",
		"     listens 10 s after the pod is Ready;",
		"001  ExternalSecrets in four namespaces after External Secrets v0.11.0 (real pods; skipAwait): its webhook;",
		"000  a Deployment mounting the TLS Secret of a Certificate that cert-manager v1.11.5 (real pods) issues.",
	}
}

func (d *realNode) failedMounts() []string { return d.mounts.failed() }

func (d *realNode) close() {}

func setUpRealNode(ctx context.Context, node *realnode.Node, dir string) (*realNode, error) {
	d := &realNode{cp: node.ControlPlane, mounts: &mountWatch{}}
	var err error
	logf := func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }
	if err := charts.BuildImages(ctx, logf, charts.RealNodeCharts...); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		chart charts.Installable
		path  *string
	}{{charts.IngressNginxChart, &d.nginxC}, {charts.ExternalSecretsChart, &d.esoC}, {charts.CertManagerChart, &d.cmC}} {
		if *c.path, err = charts.Install(ctx, node, c.chart, dir, logf); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// program is the program of the kwok runs with the real charts: ingress-nginx's Release
// waits, External Secrets' does not (skipAwait, as report 001's user set it), cert-manager's
// waits (its startupapicheck hook included) and brings its CRDs; report 000's Certificate is
// issued by a CA issuer bootstrapped from a self-signed one.
func (d *realNode) program(mode gating) pulumi.RunFunc {
	gated := mode == handGates
	return func(ctx *pulumi.Context) error {
		if mode == autoGated {
			// The one line: the rest of the program is run 1's, unchanged.
			if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "5m"}); err != nil {
				return err
			}
		}
		gateRelease := func(r *stack.HelmRelease, name string) (pulumi.Resource, error) {
			if !gated {
				return r, nil
			}
			return readiness.NewHelmReleaseReady(ctx, name+"-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String(name), Namespace: pulumi.String(name), Timeout: pulumi.String("5m"),
				Triggers: pulumi.Array{r.Revision()},
			}, reportstack.After(r))
		}
		nginx, err := reportstack.IngressNginxRelease(ctx, d.nginxC)
		if err != nil {
			return err
		}
		after, err := gateRelease(nginx, "ingress-nginx")
		if err != nil {
			return err
		}
		if err := reportstack.Ingress002(ctx, after); err != nil {
			return err
		}
		eso, err := reportstack.ExternalSecretsRelease(ctx, d.esoC)
		if err != nil {
			return err
		}
		if after, err = gateRelease(eso, "external-secrets"); err != nil {
			return err
		}
		if err := reportstack.ExternalSecrets001(ctx, after); err != nil {
			return err
		}
		cm, err := reportstack.CertManagerRelease(ctx, d.cmC, true)
		if err != nil {
			return err
		}
		cert, err := reportstack.Certificate000(ctx, cm)
		if err != nil {
			return err
		}
		before := cert
		if gated {
			if before, err = readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
				Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("ai-ops"), Timeout: pulumi.String("5m"),
			}, reportstack.After(cert)); err != nil {
				return err
			}
		}
		return reportstack.Deployment000(ctx, before)
	}
}

// mountWatch keeps the real kubelet's FailedMount messages of a run.
type mountWatch struct {
	mu   sync.Mutex
	msgs []string
}

func (m *mountWatch) add(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, msg)
}

func (m *mountWatch) failed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.msgs...)
}

// watch puts what the cluster does into the timeline, from watches (nothing is
// played): the controllers' pods becoming Ready, the kubelet's FailedMounts, cert-manager
// writing the Secret. It returns the watches' stops.
func (d *realNode) watch(ctx context.Context, tl *timeline) []func() {
	ctx, cancel := context.WithCancel(ctx)
	d.mounts = &mountWatch{}
	var wg sync.WaitGroup
	follow := func(w watch.Interface, err error, each func(watch.Event)) {
		if err != nil {
			tl.note("demo: cannot watch: %v", err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.ResultChan():
					if !ok {
						return
					}
					each(e)
				}
			}
		}()
	}
	for _, ns := range []string{"ingress-nginx", "external-secrets", "cert-manager"} {
		w, err := d.cp.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		follow(w, err, func(e watch.Event) {
			if p, ok := e.Object.(*corev1.Pod); ok && podReady(p) && p.Status.Phase == corev1.PodRunning {
				tl.say("pod %s/%s Ready", ns, shortPod(p))
			}
		})
	}
	w, err := d.cp.Client.CoreV1().Events("ai-ops").Watch(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount"})
	follow(w, err, func(e watch.Event) {
		if ev, ok := e.Object.(*corev1.Event); ok && e.Type == watch.Added {
			d.mounts.add(ev.Message)
			tl.say("kubelet: pod %s: FailedMount %s", ev.InvolvedObject.Name[strings.LastIndex(ev.InvolvedObject.Name, "-")+1:], ev.Message)
		}
	})
	w, err = d.cp.Client.CoreV1().Secrets("ai-ops").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ai-ops-agent-tls"})
	follow(w, err, func(e watch.Event) {
		if e.Type == watch.Added {
			tl.say("cert-manager issued Secret ai-ops/ai-ops-agent-tls")
		}
	})
	return []func(){func() { cancel(); wg.Wait() }}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// shortPod is a pod's name without its ReplicaSet's hash and its own suffix.
func shortPod(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			return o.Name[:max(strings.LastIndex(o.Name, "-"), 0)]
		}
		if o.Kind == "Job" {
			return o.Name
		}
	}
	return p.Name
}

// destroy destroys the run's stack as a cluster rebuilt from code starts: the CRDs'
// caches ready before their release deletes them, the CRDs and the releases' pods gone and
// cert-manager's leader Leases dropped after (controlplane.WaitCRDCaches, WaitCRDsGone,
// WaitPodsGone and DropLeases say why).
func (d *realNode) destroy(ctx context.Context, s auto.Stack, upErr error) error {
	fmt.Println("  (destroying the stack)")
	for _, g := range []string{"external-secrets.io", "cert-manager.io"} {
		if err := d.cp.WaitCRDCaches(ctx, g); err != nil {
			return err
		}
	}
	var out strings.Builder
	if _, err := s.Destroy(ctx, optdestroy.ProgressStreams(&out), optdestroy.Remove()); err != nil {
		return fmt.Errorf("pulumi destroy: %w\n%s", err, out.String())
	}
	for _, g := range []string{"external-secrets.io", "cert-manager.io"} {
		if err := d.cp.WaitCRDsGone(ctx, g); err != nil {
			return err
		}
	}
	for _, ns := range []string{"external-secrets", "cert-manager", "ingress-nginx"} {
		if err := d.cp.WaitPodsGone(ctx, ns); err != nil {
			return err
		}
	}
	if err := d.cp.DropLeases(ctx, "kube-system", "cert-manager"); err != nil {
		return err
	}
	return upErr
}
