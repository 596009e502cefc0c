package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/provider"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

const group = "bench.readiness.io"

var (
	widgets      = schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	secrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

type bench struct {
	cp      *controlplane.ControlPlane
	dyn     dynamic.Interface
	server  integration.Server
	dir     string
	kubectl string
	seq     atomic.Int64
}

func newBench(ctx context.Context, cp *controlplane.ControlPlane) (*bench, error) {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	b := &bench{cp: cp, dyn: dyn}
	if b.dir, err = os.MkdirTemp("", "readiness-bench-"); err != nil {
		return nil, err
	}
	if b.kubectl, err = exec.LookPath("kubectl"); err != nil {
		b.kubectl = ""
	}
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - {name: v1, served: true, storage: true, subresources: {status: {}}, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Probe, plural: probes, singular: probe, listKind: ProbeList}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}`, group)
	if _, err := cp.Apply(ctx, crd); err != nil {
		return nil, err
	}
	crds, err := tools.ModuleCRDs(ctx, tools.CertManagerModule, "deploy/crds")
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
			Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := cp.Apply(ctx, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: bench-%d}", i)); err != nil {
			return nil, err
		}
	}
	prov, err := provider.New()
	if err != nil {
		return nil, err
	}
	if b.server, err = integration.NewServer(ctx, provider.Name, semver.MustParse("0.1.0"), integration.WithProvider(prov)); err != nil {
		return nil, err
	}
	if err := b.server.Configure(p.ConfigureRequest{Args: property.NewMap(map[string]property.Value{
		"kubeconfig": property.New(string(cp.Kubeconfig))})}); err != nil {
		return nil, err
	}
	// Wait until the kinds are served before measuring anything.
	if _, err := b.gate("CrdReady", map[string]property.Value{"names": property.New([]property.Value{
		property.New("widgets." + group), property.New("probes." + group), property.New("certificates.cert-manager.io")})}); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) close() { _ = os.RemoveAll(b.dir) }

// gate runs one gate's Check and Create, as the engine does, and returns when it does.
func (b *bench) gate(typ string, inputs map[string]property.Value) (p.CreateResponse, error) {
	urn := presource.NewURN("bench", "readiness", "", tokens.Type("readiness:index:"+typ), fmt.Sprintf("g%d", b.seq.Add(1)))
	chk, err := b.server.Check(p.CheckRequest{Urn: urn, Inputs: property.NewMap(inputs)})
	if err != nil {
		return p.CreateResponse{}, err
	}
	if len(chk.Failures) > 0 {
		return p.CreateResponse{}, fmt.Errorf("check: %v", chk.Failures)
	}
	return b.server.Create(p.CreateRequest{Urn: urn, Properties: chk.Inputs})
}

func str(s string) property.Value { return property.New(s) }

func readyCondition(gen int64) []any {
	return []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "ready",
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
}

// setReady writes Ready=True on obj's status: the write every waiter measures from.
func (b *bench) setReady(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, extra map[string]any) error {
	obj = obj.DeepCopy()
	st := map[string]any{"conditions": readyCondition(obj.GetGeneration())}
	for k, v := range extra {
		st[k] = v
	}
	obj.Object["status"] = st
	_, err := b.dyn.Resource(gvr).Namespace(obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// waiter is a process or gate started before the write; done receives when it noticed.
type waiter struct{ done chan time.Time }

func (b *bench) startCmd(ctx context.Context, name string, args ...string) waiter {
	w := waiter{done: make(chan time.Time, 1)}
	cmd := exec.CommandContext(ctx, name, args...)
	go func() {
		err := cmd.Run()
		if err != nil {
			w.done <- time.Time{}
			return
		}
		w.done <- time.Now()
	}()
	return w
}

func (b *bench) kubeconfigPath() string { return b.cp.KubeconfigPath }

// detection runs trials of one gate kind, batch at a time, with kubectl wait and the sleep-5
// loop watching the same objects.
func (b *bench) detection(ctx context.Context, kind string, trials, batch int) (detection, error) {
	var res detection
	if b.kubectl == "" {
		res.loopNote = " kubectl was not found: its rows are empty."
	}
	for done := 0; done < trials; done += batch {
		n := min(batch, trials-done)
		type trial struct {
			obj        *unstructured.Unstructured
			gate       chan time.Time
			wait, loop waiter
			t0         time.Time
		}
		ts := make([]*trial, n)
		for i := range ts {
			name := fmt.Sprintf("%s-%d", kind, b.seq.Add(1))
			ns := "bench-0"
			var obj *unstructured.Unstructured
			var err error
			var gateType string
			var inputs map[string]property.Value
			var resource string
			switch kind {
			case "resource":
				obj, err = b.create(ctx, widgets, ns, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}", group, name, ns))
				gateType, resource = "ResourceReady", "widgets."+group+"/"+name
				inputs = map[string]property.Value{"apiVersion": str(group + "/v1"), "kind": str("Widget"), "namespace": str(ns), "name": str(name),
					"condition": property.New(property.NewMap(map[string]property.Value{"type": str("Ready")}))}
			case "certificate":
				obj, err = b.create(ctx, certificates, ns, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %[1]s, namespace: %[2]s}
spec: {secretName: %[1]s-tls, dnsNames: [%[1]s.example.test], issuerRef: {name: ca, kind: ClusterIssuer}}`, name, ns))
				gateType, resource = "CertificateReady", "certificates.cert-manager.io/"+name
				inputs = map[string]property.Value{"namespace": str(ns), "name": str(name)}
			}
			if err != nil {
				return res, err
			}
			tr := &trial{obj: obj, gate: make(chan time.Time, 1)}
			go func() {
				_, err := b.gate(gateType, inputs)
				if err != nil {
					fmt.Fprintln(os.Stderr, "gate:", err)
					tr.gate <- time.Time{}
					return
				}
				tr.gate <- time.Now()
			}()
			if b.kubectl != "" {
				tr.wait = b.startCmd(ctx, b.kubectl, "--kubeconfig", b.kubeconfigPath(), "wait", "-n", ns, "--for=condition=Ready", resource, "--timeout=120s")
				// Each loop starts at a random phase of its 5 s period, as a person's loop would be
				// relative to the moment the object turns ready.
				loop := fmt.Sprintf(`sleep %.3f; until %s --kubeconfig %s get -n %s %s -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q True; do sleep 5; done`,
					rand.Float64()*5, b.kubectl, b.kubeconfigPath(), ns, resource)
				tr.loop = b.startCmd(ctx, "bash", "-c", loop)
			}
			ts[i] = tr
		}
		time.Sleep(1500 * time.Millisecond) // every waiter is started and watching (kubectl's start-up is ~300 ms)
		for _, tr := range ts {
			if kind == "certificate" {
				c, err := fakes.IssueCertificate(tr.obj.GetName()+".example.test", 48*time.Hour)
				if err != nil {
					return res, err
				}
				sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
					"metadata": map[string]any{"name": tr.obj.GetName() + "-tls", "namespace": tr.obj.GetNamespace()}, "type": "kubernetes.io/tls",
					"data": map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM), "tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM)}}}
				if _, err := b.dyn.Resource(secrets).Namespace(tr.obj.GetNamespace()).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
					return res, err
				}
				tr.t0 = time.Now()
				if err := b.setReady(ctx, certificates, tr.obj, map[string]any{"revision": int64(1), "notAfter": c.NotAfter.UTC().Format(time.RFC3339)}); err != nil {
					return res, err
				}
				continue
			}
			tr.t0 = time.Now()
			if err := b.setReady(ctx, widgets, tr.obj, nil); err != nil {
				return res, err
			}
		}
		for _, tr := range ts {
			if t := <-tr.gate; !t.IsZero() {
				res.gate = append(res.gate, t.Sub(tr.t0))
			}
			if b.kubectl != "" {
				if t := <-tr.wait.done; !t.IsZero() {
					res.kubectlWait = append(res.kubectlWait, t.Sub(tr.t0))
				}
				if t := <-tr.loop.done; !t.IsZero() {
					res.loop = append(res.loop, t.Sub(tr.t0))
				}
			}
		}
	}
	return res, nil
}

func (b *bench) create(ctx context.Context, gvr schema.GroupVersionResource, ns, doc string) (*unstructured.Unstructured, error) {
	u, err := controlplane.Decode(doc)
	if err != nil {
		return nil, err
	}
	return b.dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
}

// webhookDetection measures how soon WebhookReady notices a webhook that starts listening
// while nothing in the cluster changes (a URL webhook outside the cluster): the gate's TCP
// connects to the URL's address notice it (see provider/run_wake.go). The webhook starts at a random moment of the gate's probe
// schedule, so the figures cover every phase of it.
func (b *bench) webhookDetection(ctx context.Context, trials int) (dist, error) {
	return b.webhookTrials(ctx, trials, false, "WebhookReady")
}

// webhookEventDetection measures the same when the cluster says the webhook may now be up, as
// it does for real installs: the webhook starts serving and its caBundle is injected at once
// (cert-manager's cainjector, a chart's patch Job); an EndpointSlice turning ready is the same
// kind of event. The gate probes on the event instead of waiting for its backoff clock.
func (b *bench) webhookEventDetection(ctx context.Context, trials int) (dist, error) {
	return b.webhookTrials(ctx, trials, true, "WebhookReady")
}

// admissionDetection measures the same for AdmissionReady, whose rounds dry-run the object the
// webhook intercepts (the program's own object instead of a probe), on the backoff clock only
// or on a cluster event (the gate watches every webhook configuration).
func (b *bench) admissionDetection(ctx context.Context, trials int, event bool) (dist, error) {
	return b.webhookTrials(ctx, trials, event, "AdmissionReady")
}

func (b *bench) webhookTrials(ctx context.Context, trials int, event bool, gate string) (dist, error) {
	var out dist
	vwc := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	// The webhooks intercept a kind of their own, so the other benchmarks never meet a stale one.
	probe := property.New(property.NewMap(map[string]property.Value{"apiVersion": str(group + "/v1"), "kind": str("Probe"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"name": str("probe"), "namespace": str("bench-1")}))}))
	// The API server's first create of a new CRD's kind can take most of a second: make it
	// before any webhook intercepts the kind, so the first trial measures the gate.
	if err := b.dryRunCreatesFast(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "probes"}, "Probe", "bench-1"); err != nil {
		return nil, err
	}
	for i := 0; i < trials; i++ {
		wh, err := fakes.NewWebhook()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("bench-%s-%d-%v", strings.ToLower(gate), i, event)
		doc := wh.ConfigurationFor("ValidatingWebhookConfiguration", name, group, "probes")
		if event { // no caBundle yet: the API server cannot trust the webhook before the injection
			doc = strings.Replace(doc, "caBundle: "+wh.CABundle(), `caBundle: ""`, 1)
		}
		if _, err := b.cp.Apply(ctx, doc); err != nil {
			return nil, err
		}
		done := make(chan time.Time, 1)
		go func() {
			inputs := map[string]property.Value{"validatingWebhookConfiguration": str(name), "probe": probe, "timeout": str("60s")}
			if gate == "AdmissionReady" {
				inputs = map[string]property.Value{"objects": property.New([]property.Value{probe}), "timeout": str("60s")}
			}
			_, err := b.gate(gate, inputs)
			if err != nil {
				fmt.Fprintln(os.Stderr, gate+" gate:", err)
				done <- time.Time{}
				return
			}
			done <- time.Now()
		}()
		// The gate is probing a closed port by now, at its backoff cap; start at a random phase.
		time.Sleep(1200*time.Millisecond + rand.N(500*time.Millisecond))
		t0 := time.Now()
		if err := wh.Start(); err != nil {
			return nil, err
		}
		if event {
			cur, err := b.dyn.Resource(vwc).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			hooks, _, _ := unstructured.NestedSlice(cur.Object, "webhooks")
			hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = wh.CABundle()
			cur.Object["webhooks"] = hooks
			if _, err := b.dyn.Resource(vwc).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return nil, err
			}
		}
		if t := <-done; !t.IsZero() {
			out = append(out, t.Sub(t0))
		}
		wh.Close()
		_ = b.dyn.Resource(vwc).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return out, nil
}

// conversionDetection measures how soon CrdReady proves a conversion webhook (registered by URL,
// as testenv.ConversionCRD's) that starts listening while the gate waits: a CRD of its own per
// trial, the webhook started at a random phase of the gate's schedule; time from Listen to the
// gate returning.
func (b *bench) conversionDetection(ctx context.Context, trials int) (dist, error) {
	var out dist
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for i := 0; i < trials; i++ {
		wh, err := fakes.NewWebhook()
		if err != nil {
			return nil, err
		}
		c := testenv.ConversionCRD{Group: fmt.Sprintf("conv%d.%s", i, group), Kind: "Gadget", Plural: "gadgets", URL: wh.ConvertURL(), CABundle: wh.CABundle()}
		if _, err := b.cp.Apply(ctx, c.Doc()); err != nil {
			return nil, err
		}
		name := "gadgets." + c.Group
		// The API server's first requests for a new CRD can take seconds: wait until a dry-run
		// through v2 fails fast on the conversion webhook, so the trial measures the gate.
		if err := b.conversionFailsFast(ctx, c); err != nil {
			return nil, err
		}
		done := make(chan time.Time, 1)
		go func() {
			_, err := b.gate("CrdReady", map[string]property.Value{"names": property.New([]property.Value{str(name)}), "timeout": str("60s")})
			if err != nil {
				fmt.Fprintln(os.Stderr, "CrdReady gate:", err)
				done <- time.Time{}
				return
			}
			done <- time.Now()
		}()
		// The gate is proving against a closed port by now; start at a random phase.
		time.Sleep(1500*time.Millisecond + rand.N(500*time.Millisecond))
		t0 := time.Now()
		if err := wh.Start(); err != nil {
			return nil, err
		}
		if t := <-done; !t.IsZero() {
			out = append(out, t.Sub(t0))
		}
		wh.Close()
		_ = b.dyn.Resource(crds).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return out, nil
}

// conversionFailsFast waits (up to 60 s) until a dry-run create of c's kind through v2 is
// refused by the conversion webhook within 100 ms.
func (b *bench) conversionFailsFast(ctx context.Context, c testenv.ConversionCRD) error {
	gvr := schema.GroupVersionResource{Group: c.Group, Version: "v2", Resource: c.Plural}
	obj := map[string]any{"apiVersion": c.Group + "/v2", "kind": c.Kind,
		"metadata": map[string]any{"generateName": "warm-", "namespace": "default"}, "spec": map[string]any{"count": int64(1)}}
	err := b.dryRunUntilFast(ctx, gvr, obj, func(err error) bool { return err != nil && strings.Contains(err.Error(), "conversion webhook") })
	if err != nil {
		return fmt.Errorf("CRD %s: a dry-run through v2 did not fail fast on its conversion webhook: %v", c.Group, err)
	}
	return nil
}

// dryRunCreatesFast waits (up to 60 s) until a dry-run create of kind in ns is admitted within 100 ms.
func (b *bench) dryRunCreatesFast(ctx context.Context, gvr schema.GroupVersionResource, kind, ns string) error {
	obj := map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"generateName": "warm-", "namespace": ns}}
	if err := b.dryRunUntilFast(ctx, gvr, obj, func(err error) bool { return err == nil }); err != nil {
		return fmt.Errorf("%s: a dry-run create was not admitted within 100 ms: %v", gvr, err)
	}
	return nil
}

// dryRunUntilFast dry-runs creates of obj until one's answer is the one wanted and came within
// 100 ms (up to 60 s); when none did, its error quotes the last answer.
func (b *bench) dryRunUntilFast(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any, wanted func(error) bool) error {
	ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
	deadline := time.Now().Add(60 * time.Second)
	for {
		t0 := time.Now()
		_, err := b.dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if wanted(err) && time.Since(t0) < 100*time.Millisecond {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("last answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heapSampler records the peak Go heap in use while it runs.
type heapSampler struct {
	stop chan struct{}
	peak atomic.Uint64
	wg   sync.WaitGroup
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if v := m.HeapInuse + m.StackInuse; v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) done() float64 {
	close(h.stop)
	h.wg.Wait()
	return float64(h.peak.Load()) / (1 << 20)
}

func (b *bench) scaleRun(ctx context.Context, n int) (scaleResult, error) {
	res := scaleResult{gates: n, namespaces: 10}
	var objs []*unstructured.Unstructured
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("bench-%d", i%10)
		o, err := b.create(ctx, widgets, ns, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: scale-%d, namespace: %s}", group, i, ns))
		if err != nil {
			return res, err
		}
		objs = append(objs, o)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	res.baseHeapMB = float64(m.HeapInuse+m.StackInuse) / (1 << 20)
	heap := sampleHeap()
	watches0, req0 := kube.Stats.WatchesOpened.Load(), kube.Stats.Requests.Load()
	returned := make(chan time.Time, n)
	for _, o := range objs {
		o := o
		go func() {
			_, err := b.gate("ResourceReady", map[string]property.Value{"apiVersion": str(group + "/v1"), "kind": str("Widget"),
				"namespace": str(o.GetNamespace()), "name": str(o.GetName()),
				"condition": property.New(property.NewMap(map[string]property.Value{"type": str("Ready")})), "timeout": str("10m")})
			if err != nil {
				fmt.Fprintln(os.Stderr, "scale gate:", err)
			}
			returned <- time.Now()
		}()
	}
	time.Sleep(5 * time.Second) // all gates are waiting on their watches
	reqWait0 := kube.Stats.Requests.Load()
	time.Sleep(3 * time.Second) // idle waiting: no polling requests should appear here
	res.requestsWait = kube.Stats.Requests.Load() - reqWait0
	first := time.Now()
	var mu sync.Mutex
	var last time.Time // when the last write was sent
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, o := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func(o *unstructured.Unstructured) {
			defer wg.Done()
			defer func() { <-sem }()
			sent := time.Now()
			mu.Lock()
			if sent.After(last) {
				last = sent
			}
			mu.Unlock()
			if err := b.setReady(ctx, widgets, o, nil); err != nil {
				fmt.Fprintln(os.Stderr, "scale write:", err)
			}
		}(o)
	}
	wg.Wait()
	res.writeSpread = last.Sub(first)
	var lastGate time.Time
	for i := 0; i < n; i++ {
		if t := <-returned; t.After(lastGate) {
			lastGate = t
		}
	}
	res.lastReadyToLastGate = lastGate.Sub(last)
	res.peakHeapMB = heap.done()
	res.watches = int(kube.Stats.WatchesOpened.Load() - watches0)
	res.requestsTotal = kube.Stats.Requests.Load() - req0
	return res, nil
}
