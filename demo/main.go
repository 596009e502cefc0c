// Command demo is `make demo`: it starts a local Kubernetes control plane and runs one Pulumi
// program twice with the real pulumi-kubernetes (plugin v4.32.0, see internal/k8splugin):
// three Helm releases of real charts (ingress-nginx, External Secrets, cert-manager, rendered
// by the Helm CLI and wrapped as local charts) and the objects field reports 000, 001 and 002
// failed to create after them. First without gates (the reports' errors, as pulumi-kubernetes
// reports them), then with gates; it prints both timelines side by side and what `sleep 30` or
// a `sleep 5` loop would have cost. The demo plays what no process runs here: the charts'
// webhook servers (on 127.0.0.1, serving late), cert-manager issuing, and the kubelet's mounts.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// What the field reports measured, played here.
const (
	webhookLate = 7 * time.Second  // 002: the webhook listens 7-10 s after its pod is ready
	issueLate   = 12 * time.Second // 000: cert-manager wrote the Secret at T+12s
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// timeline records lines stamped with the time since its run started.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	upTook time.Duration // pulumi up, from start to its end
	lines  []line
	seen   map[string]bool
	begun  map[string]time.Time // URN → when its operation started
	took   map[string]time.Duration
}

type line struct {
	at  time.Duration
	msg string
}

func newTimeline() *timeline {
	return &timeline{start: time.Now(), seen: map[string]bool{}, begun: map[string]time.Time{}, took: map[string]time.Duration{}}
}

func (tl *timeline) say(format string, a ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	if tl.seen[msg] {
		return
	}
	tl.seen[msg] = true
	l := line{time.Since(tl.start), msg}
	tl.lines = append(tl.lines, l)
	fmt.Printf("  t+%5.1fs  %s\n", l.at.Seconds(), msg)
}

// note prints a line like say without keeping it in the timeline.
func (tl *timeline) note(format string, a ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	if tl.seen[msg] {
		return
	}
	tl.seen[msg] = true
	if len(msg) > 220 {
		msg = msg[:217] + "..."
	}
	fmt.Printf("  t+%5.1fs  %s\n", time.Since(tl.start).Seconds(), msg)
}

func run() error {
	ctx := context.Background()
	realNode := flag.Bool("realnode", false, "run on a real node (containerd, kubelet, kube-proxy) with the controllers' real pods")
	flag.Parse()
	fmt.Println("== pulumi-readiness demo ==")
	opts := controlplane.Options{Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }}
	if *realNode {
		if missing := realnode.Requirements(); missing != "" {
			return fmt.Errorf("a real node needs %s (make demo runs on kwok's simulated nodes without them)", missing)
		}
		fmt.Println("Building tools and images if needed and starting a local control plane with a real node (etcd, kube-apiserver, controller manager, scheduler; containerd, kubelet, kube-proxy)...")
	} else {
		fmt.Println("Building tools if needed and starting a local control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)...")
	}
	var (
		cp  *controlplane.ControlPlane
		rn  *realnode.Node
		err error
	)
	if *realNode {
		if rn, err = realnode.Start(ctx, opts); err != nil {
			return err
		}
		defer rn.Stop()
		cp = rn.ControlPlane
	} else {
		if cp, err = controlplane.Start(ctx, opts); err != nil {
			return err
		}
		defer cp.Stop()
	}
	fmt.Printf("Control plane ready in %s at %s\n", cp.StartTime.Round(time.Millisecond), cp.Host)
	dir, err := os.MkdirTemp("", "readiness-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := stack.Prepare(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Printf("Kubernetes objects are created by pulumi-kubernetes v%s (%s).\n", k8splugin.Version, k8splugin.PluginDir(k8splugin.ProjectHome()))

	var d node
	if *realNode {
		d, err = setUpRealNode(ctx, rn, dir)
	} else {
		d, err = setUpKwok(ctx, cp, dir)
	}
	if err != nil {
		return err
	}
	defer d.close()

	fmt.Println("\nOne program, the way a homelab stack is written: three Helm releases (helm.sh/v3:Release of the real")
	fmt.Println("ingress-nginx, External Secrets and cert-manager charts), then what field reports 000-002 created after them:")
	for _, l := range d.intro() {
		fmt.Println("  " + l)
	}

	fmt.Println("\n-- 1. Without gates: `dependsOn` on the releases only --")
	bare, bareErr := up(ctx, env, cp, d, "nogate", noGates)
	if bareErr == nil {
		return fmt.Errorf("the stack without gates succeeded: the demo's race did not happen")
	}
	fmt.Println("\nWhat pulumi-kubernetes reported:")
	for _, e := range bare.errors() {
		fmt.Println("  " + e)
	}
	for _, m := range d.failedMounts() {
		fmt.Println("  kubelet (pod ai-ops-agent): Warning FailedMount " + m)
		break
	}

	fmt.Println("\n-- 2. With gates: HelmReleaseReady after each release, CertificateReady before the Deployment --")
	gated, err := up(ctx, env, cp, d, "gated", handGates)
	if err != nil {
		return fmt.Errorf("pulumi up with gates: %w", err)
	}
	fmt.Println("\nBoth timelines, side by side:")
	sideBySide(bare, gated)
	costs(gated)

	fmt.Println("\n-- 3. The same program as in run 1, with one line at its top: readiness.AutoGate(ctx, nil) --")
	auto, err := up(ctx, env, cp, d, "autogate", autoGated)
	if err != nil {
		return fmt.Errorf("pulumi up with autoGate: %w", err)
	}
	fmt.Println("\nThe gates autoGate put in by itself, and what each waited for:")
	for _, l := range auto.lines {
		if strings.HasPrefix(l.msg, "autoGate: ") {
			fmt.Println("  " + l.msg)
		}
	}
	costs(auto)
	fmt.Printf("\n`pulumi up` took %.1f s with hand gates and %.1f s with autoGate; without gates it failed after %.1f s.\n",
		gated.upTook.Seconds(), auto.upTook.Seconds(), bare.upTook.Seconds())
	fmt.Println("\nStopping the control plane. Demo succeeded.")
	return nil
}

// node is what the three runs stand on: kwok's simulated nodes, where the controllers' webhook
// pods, cert-manager and the kubelet are played (kwokNode, below), or a real node running them
// (realNode, realnode.go).
type node interface {
	// intro says what the reports meet on this node, a line each.
	intro() []string
	program(mode gating) pulumi.RunFunc
	// watch starts what a run needs beside its stack (the players; the watches of what the
	// real pods do), putting what happens into tl; it returns their stops.
	watch(ctx context.Context, tl *timeline) []func()
	// failedMounts are the kubelet's FailedMount messages of the last run.
	failedMounts() []string
	// destroy brings a run's stack down and gives the cluster back for the next run; it returns
	// upErr unless the destroy itself failed.
	destroy(ctx context.Context, s auto.Stack, upErr error) error
	close()
}

// kwokNode holds what the runs on kwok share: the charts, the webhook servers that play the
// charts' webhook pods, and the played kubelet.
type kwokNode struct {
	cp                *controlplane.ControlPlane
	dyn               dynamic.Interface
	nginx, eso, cm    *fakes.Webhook
	nginxC, esoC, cmC string
	kubelet           *fakes.Kubelet
}

func (d *kwokNode) intro() []string {
	return []string{
		"002  an Ingress after ingress-nginx: its admission webhook listens 7 s after the controller is ready;",
		"001  ExternalSecrets in four namespaces after External Secrets: same race, other webhook;",
		"000  a Deployment mounting the TLS Secret of a Certificate that cert-manager issues 12 s later.",
	}
}

func (d *kwokNode) failedMounts() []string { return d.kubelet.FailedMounts() }

func setUpKwok(ctx context.Context, cp *controlplane.ControlPlane, dir string) (*kwokNode, error) {
	d := &kwokNode{cp: cp}
	var err error
	if d.dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	for _, w := range []**fakes.Webhook{&d.nginx, &d.eso, &d.cm} {
		if *w, err = fakes.NewWebhook(); err != nil {
			return nil, err
		}
	}
	// cert-manager's own webhook is not report 000's story: it serves from the start.
	if err := d.cm.Start(); err != nil {
		return nil, err
	}
	if d.nginxC, err = charts.Local(dir, "ingress-nginx", d.nginx); err != nil {
		return nil, err
	}
	crds, err := charts.ExternalSecretsCRDs(ctx)
	if err != nil {
		return nil, err
	}
	if d.esoC, err = charts.Local(dir, "external-secrets", d.eso, crds...); err != nil {
		return nil, err
	}
	cm, err := charts.Rendered("cert-manager")
	if err != nil {
		return nil, err
	}
	// cert-manager's CRDs by a step of their own (crds.enabled=false in the release), as many do.
	if d.cmC, err = charts.Write(dir, "cert-manager", charts.Prepare(charts.WithoutCRDs(cm), d.cm)); err != nil {
		return nil, err
	}
	cmCRDs, err := tools.ModuleCRDs(ctx, tools.CertManagerModule, "deploy/crds")
	if err != nil {
		return nil, err
	}
	for _, c := range cmCRDs {
		ri, err := cp.ResourceFor(ctx, c)
		if err != nil {
			return nil, err
		}
		if _, err := ri.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *kwokNode) close() {
	for _, w := range []*fakes.Webhook{d.nginx, d.eso, d.cm} {
		w.Close()
	}
}

var esoNamespaces = []string{"default", "hello-world", "nodejs-demo", "storage-validator"}

// How a run gates: not at all (dependsOn on the releases only), by hand, or by autoGate alone.
type gating int

const (
	noGates gating = iota
	handGates
	autoGated
)

func (d *kwokNode) program(mode gating) pulumi.RunFunc {
	gated := mode == handGates
	return func(ctx *pulumi.Context) error {
		if mode == autoGated {
			// The one line: the rest of the program is run 1's, unchanged.
			if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "3m"}); err != nil {
				return err
			}
		}
		release := func(name, chart string) (*stack.HelmRelease, error) {
			return stack.NewHelmRelease(ctx, name, pulumi.Map{"chart": pulumi.String(chart), "name": pulumi.String(name),
				"namespace": pulumi.String(name), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(300)})
		}
		// gateRelease is HelmReleaseReady on r when gated, else r itself.
		gateRelease := func(r *stack.HelmRelease, name string) (pulumi.Resource, error) {
			if !gated {
				return r, nil
			}
			return readiness.NewHelmReleaseReady(ctx, name+"-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String(name), Namespace: pulumi.String(name), Timeout: pulumi.String("3m"),
				Triggers: pulumi.Array{r.Revision()},
			}, pulumi.DependsOn([]pulumi.Resource{r}))
		}
		kube := func(name, manifest string, deps ...pulumi.Resource) (*stack.Kube, error) {
			return stack.NewKube(ctx, name, manifest, pulumi.DependsOn(deps))
		}

		// 002: an Ingress after ingress-nginx.
		nginx, err := release("ingress-nginx", d.nginxC)
		if err != nil {
			return err
		}
		after, err := gateRelease(nginx, "ingress-nginx")
		if err != nil {
			return err
		}
		apps, err := kube("apps", "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}")
		if err != nil {
			return err
		}
		// skipAwait: no ingress controller fills status.loadBalancer here.
		if _, err := kube("web", `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: apps, annotations: {pulumi.com/skipAwait: "true"}}
spec:
  ingressClassName: nginx
  rules: [{host: web.example.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]`,
			after, apps); err != nil {
			return err
		}

		// 001: ExternalSecrets after External Secrets.
		eso, err := release("external-secrets", d.esoC)
		if err != nil {
			return err
		}
		if after, err = gateRelease(eso, "external-secrets"); err != nil {
			return err
		}
		for _, ns := range esoNamespaces {
			deps := []pulumi.Resource{after}
			if ns != "default" {
				n, err := kube("ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
				if err != nil {
					return err
				}
				deps = append(deps, n)
			}
			if _, err := kube("ghcr-pull-secret-"+ns, `apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr-pull-secret, namespace: `+ns+`}
spec: {refreshInterval: 1h, secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}, target: {name: ghcr-pull-secret}, dataFrom: [{extract: {key: ghcr}}]}`,
				deps...); err != nil {
				return err
			}
		}

		// 000: a Deployment mounting a cert-manager TLS Secret.
		cm, err := release("cert-manager", d.cmC)
		if err != nil {
			return err
		}
		aiOps, err := kube("ai-ops", "apiVersion: v1\nkind: Namespace\nmetadata: {name: ai-ops}")
		if err != nil {
			return err
		}
		cert, err := kube("ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.ai-ops.svc], issuerRef: {name: vault-issuer, kind: ClusterIssuer}}`, cm, aiOps)
		if err != nil {
			return err
		}
		var beforeDeployment pulumi.Resource = cert
		if gated {
			if beforeDeployment, err = readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
				Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("ai-ops"), Timeout: pulumi.String("3m"),
			}, pulumi.DependsOn([]pulumi.Resource{cert})); err != nil {
				return err
			}
		}
		_, err = kube("ai-ops-agent", `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}, annotations: {`+fakes.KubeletMountAnnotation+`: 1h}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: registry.local/ai-ops-agent:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, beforeDeployment)
		return err
	}
}

// up runs the program (gated or not) on d, then destroys it; it returns the run's timeline and
// up's error.
func up(ctx context.Context, env *stack.Env, cp *controlplane.ControlPlane, d node, name string, mode gating) (*timeline, error) {
	s, err := env.Stack(ctx, "readiness-demo", name, string(cp.Kubeconfig), d.program(mode))
	if err != nil {
		return nil, err
	}
	tl := newTimeline()
	stops := d.watch(ctx, tl)
	evs := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range evs {
			tl.describe(e)
		}
	}()
	// ContinueOnError: like a user's stack, everything that does not depend on a failed object is
	// still attempted, so the run without gates meets all three reports.
	_, upErr := s.Up(ctx, optup.EventStreams(evs), optup.ContinueOnError())
	<-done
	tl.upTook = time.Since(tl.start)
	if upErr != nil {
		tl.say("pulumi up FAILED")
	} else {
		tl.say("pulumi up succeeded")
	}
	for _, stop := range stops {
		stop()
	}
	return tl, d.destroy(ctx, s, upErr)
}

// destroy destroys the stack while the played webhooks serve (External Secrets' also intercepts
// DELETE), and deletes the Secret the played cert-manager wrote.
func (d *kwokNode) destroy(ctx context.Context, s auto.Stack, upErr error) error {
	_ = d.nginx.Start()
	_ = d.eso.Start()
	fmt.Println("  (destroying the stack)")
	var out strings.Builder
	if _, err := s.Destroy(ctx, optdestroy.ProgressStreams(&out), optdestroy.Remove()); err != nil {
		return fmt.Errorf("pulumi destroy: %w\n%s", err, out.String())
	}
	d.nginx.Stop()
	d.eso.Stop()
	if ri, err := d.cp.ResourceFor(ctx, mustDecode("apiVersion: v1\nkind: Secret\nmetadata: {name: ai-ops-agent-tls, namespace: ai-ops}")); err == nil {
		_ = ri.Delete(ctx, "ai-ops-agent-tls", metav1.DeleteOptions{})
	}
	return upErr
}

// watch starts the players of what no process runs on kwok; it returns their stops.
func (d *kwokNode) watch(_ context.Context, tl *timeline) []func() {
	players := []*fakes.Player{
		fakes.ServeWhenAvailable(d.cp.Client, d.nginx, "ingress-nginx", "ingress-nginx-controller", webhookLate,
			func() { tl.say("demo: ingress-nginx's admission webhook starts listening") }),
		fakes.ServeWhenAvailable(d.cp.Client, d.eso, "external-secrets", "external-secrets-webhook", webhookLate,
			func() { tl.say("demo: External Secrets' webhook starts listening") }),
		fakes.IssueWhenCreated(d.dyn, "ai-ops", "ai-ops-agent", "ai-ops-agent-tls", issueLate,
			func() { tl.say("demo: cert-manager issued Secret ai-ops/ai-ops-agent-tls") }),
	}
	d.kubelet = fakes.PlayKubelet(d.cp.Client, "ai-ops", "app=ai-ops-agent", func(pod, msg string) {
		tl.say("kubelet: pod %s: FailedMount %s", pod[strings.LastIndex(pod, "-")+1:], msg)
	})
	players = append(players, d.kubelet.Player)
	var stops []func()
	for _, p := range players {
		stops = append(stops, func() { _ = p.Stop() })
	}
	return stops
}

func mustDecode(doc string) *unstructured.Unstructured {
	u, err := controlplane.Decode(doc)
	if err != nil {
		panic(err)
	}
	return u
}

func shortURN(urn string) string {
	parts := strings.Split(urn, "::")
	return parts[len(parts)-1]
}

func (tl *timeline) describe(e events.EngineEvent) {
	skip := func(typ string) bool {
		return typ == "pulumi:pulumi:Stack" || strings.HasPrefix(typ, "pulumi:providers:")
	}
	switch {
	case e.ResourcePreEvent != nil && !skip(e.ResourcePreEvent.Metadata.Type):
		m := e.ResourcePreEvent.Metadata
		tl.mu.Lock()
		tl.begun[m.URN] = time.Now()
		tl.mu.Unlock()
		tl.say("%s %s: creating", kindOf(m.Type), shortURN(m.URN))
	case e.ResOutputsEvent != nil && !skip(e.ResOutputsEvent.Metadata.Type):
		m := e.ResOutputsEvent.Metadata
		tl.mu.Lock()
		if b, ok := tl.begun[m.URN]; ok {
			tl.took[m.URN] = time.Since(b)
		}
		tl.mu.Unlock()
		tl.say("%s %s: created", kindOf(m.Type), shortURN(m.URN))
	case e.ResOpFailedEvent != nil:
		tl.say("%s: FAILED", shortURN(e.ResOpFailedEvent.Metadata.URN))
	case e.DiagnosticEvent != nil && e.DiagnosticEvent.Severity == "error" && e.DiagnosticEvent.URN != "":
		tl.say("error %s: %s", shortURN(e.DiagnosticEvent.URN), oneLine(e.DiagnosticEvent.Message))
	case e.DiagnosticEvent != nil && strings.HasPrefix(strings.TrimSpace(e.DiagnosticEvent.Message), "autoGate: "):
		// autoGate says, once per gate, what waits for what.
		tl.say("%s", oneLine(e.DiagnosticEvent.Message))
	case e.DiagnosticEvent != nil && strings.Contains(e.DiagnosticEvent.URN, "readiness:index:") && strings.TrimSpace(e.DiagnosticEvent.Message) != "":
		// A gate's status line (what it waits for, what it last saw): printed, not kept for the
		// side-by-side view.
		tl.note("%s: %s", shortURN(e.DiagnosticEvent.URN), oneLine(e.DiagnosticEvent.Message))
	}
}

func kindOf(typ string) string { return typ[strings.LastIndex(typ, ":")+1:] }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// errors are the run's error lines, the reports' messages first.
func (tl *timeline) errors() []string {
	var out []string
	for _, l := range tl.lines {
		if strings.HasPrefix(l.msg, "error ") {
			out = append(out, l.msg)
		}
	}
	return out
}

// sideBySide prints the two timelines in two columns, in time order.
func sideBySide(a, b *timeline) {
	const w = 62
	cut := func(s string) string {
		if len(s) > w-10 {
			return s[:w-13] + "..."
		}
		return s
	}
	fmt.Printf("  %-*s | %s\n", w, "without gates", "with gates")
	fmt.Printf("  %s-+-%s\n", strings.Repeat("-", w), strings.Repeat("-", w))
	type row struct {
		at   time.Duration
		left bool
		msg  string
	}
	var rows []row
	for _, l := range a.lines {
		rows = append(rows, row{l.at, true, l.msg})
	}
	for _, l := range b.lines {
		rows = append(rows, row{l.at, false, l.msg})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at < rows[j].at })
	for _, r := range rows {
		cell := fmt.Sprintf("t+%5.1fs %s", r.at.Seconds(), cut(r.msg))
		if r.left {
			fmt.Printf("  %-*s |\n", w, cell)
		} else {
			fmt.Printf("  %-*s | %s\n", w, "", cell)
		}
	}
}

// costs compares each gate's measured wait with what fixed sleeps would have cost.
func costs(tl *timeline) {
	fmt.Println("\nEach gate's wait against the usual workarounds (per wait point, after what it depends on):")
	w := len("total (one after another)")
	for urn := range tl.took {
		if strings.Contains(urn, "readiness:index:") {
			w = max(w, len(shortURN(urn)))
		}
	}
	fmt.Printf("  %-*s %8s %10s %14s\n", w, "gate", "waited", "sleep 30", "sleep 5 loop")
	var total, sleepTotal, loopTotal float64
	urns := make([]string, 0, len(tl.took))
	for urn := range tl.took {
		if strings.Contains(urn, "readiness:index:") {
			urns = append(urns, urn)
		}
	}
	sort.Strings(urns)
	for _, urn := range urns {
		waited := tl.took[urn].Seconds()
		loop := math.Ceil(waited/5) * 5
		verdict := "30.0s"
		if waited > 30 {
			verdict = "too short"
		}
		fmt.Printf("  %-*s %7.1fs %10s %13.1fs\n", w, shortURN(urn), waited, verdict, loop)
		total, sleepTotal, loopTotal = total+waited, sleepTotal+30, loopTotal+loop
	}
	fmt.Printf("  %-*s %7.1fs %9.1fs %13.1fs\n", w, "total (one after another)", total, sleepTotal, loopTotal)
}
