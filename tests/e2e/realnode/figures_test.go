package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestFiguresRealFieldReports (READINESS_FIGURES=N rounds per way; `make bench-realnode`
// writes its table into BENCHMARKS.md): field reports 000 and 001 as one stack on a real
// node (cert-manager and External Secrets as real pods, their Releases not waiting), brought
// up four ways, each against the floor: the moment the slower controller first admits its
// kind (an observer outside the product dry-runs an ExternalSecret and a Certificate every
// 10 ms). The ways: autoGate's line; hand-placed gates; the field reports' own serial script
// (`kubectl wait` on the Deployments, then sleep-5 loops until the webhook admits and the
// Certificate is Ready, each stage its own `pulumi up`); and `sleep 30` between the releases
// and the rest. What a way costs over the floor is the figure to beat.
func TestFiguresRealFieldReports(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("READINESS_FIGURES"))
	if rounds <= 0 {
		t.Skip("READINESS_FIGURES=N runs N rounds per way (make bench-realnode)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	var esChart, cmChart string
	for _, c := range []struct {
		chart *charts.ModuleChart
		path  *string
	}{{&charts.ExternalSecretsChart, &esChart}, {&charts.CertManagerChart, &cmChart}} {
		if err := c.chart.LoadImages(ctx, testenv.CP, t.Logf); err != nil {
			t.Fatal(err)
		}
		p, err := c.chart.Write(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		*c.path = p
	}
	env := stacktest.Prepare(t)
	results := map[string][]figure{}
	ways := []string{"autogate", "gates", "script", "sleep30"}
	for round := 1; round <= rounds; round++ {
		for _, way := range ways {
			f := runWay(ctx, t, env, way, esChart, cmChart)
			t.Logf("round %d, %s: %s", round, way, f)
			results[way] = append(results[way], f)
		}
	}
	table := figuresTable(ways, results)
	t.Log("\n" + table)
	if out := os.Getenv("READINESS_FIGURES_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// figure is one way's round: the whole run, the floor, and whether it succeeded.
type figure struct {
	total, floor time.Duration
	err          error
}

func (f figure) String() string {
	if f.err != nil {
		return fmt.Sprintf("FAILED after %s (floor %s): %s", f.total.Round(time.Millisecond), f.floor.Round(time.Millisecond), firstLine(f.err.Error(), "error"))
	}
	return fmt.Sprintf("%s, floor %s, over it %s", f.total.Round(time.Millisecond), f.floor.Round(time.Millisecond), (f.total - f.floor).Round(time.Millisecond))
}

// runWay brings the stack up one way, from nothing, and destroys it.
func runWay(ctx context.Context, t *testing.T, env *stack.Env, way, esChart, cmChart string) figure {
	s := stacktest.NewStack(t, env, "figures-"+way, reportsProgram(way, "all", esChart, cmChart))
	obs := observeControllers(ctx, t)
	began := time.Now()
	var err error
	up := func(stage string) error {
		s.Workspace().SetProgram(reportsProgram(way, stage, esChart, cmChart))
		_, err := s.Up(ctx)
		return err
	}
	switch way {
	case "autogate", "gates":
		err = up("all")
	case "script":
		// The reports' serial script: releases, wait, the custom resources, wait, the rest.
		if err = up("releases"); err == nil {
			if err = sh(ctx, `kubectl wait --for=condition=Available deployment --all -n external-secrets --timeout=300s &&
kubectl wait --for=condition=Available deployment --all -n cert-manager --timeout=300s &&
until kubectl apply --dry-run=server -f "$ES" >/dev/null 2>&1; do sleep 5; done &&
until kubectl apply --dry-run=server -f "$CERT" >/dev/null 2>&1; do sleep 5; done`); err == nil {
				if err = up("resources"); err == nil {
					if err = sh(ctx, `until kubectl get certificate ai-ops-agent -n ai-ops -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q True; do sleep 5; done`); err == nil {
						err = up("all")
					}
				}
			}
		}
	case "sleep30":
		if err = up("releases"); err == nil {
			time.Sleep(30 * time.Second) // the way being measured
			err = up("all")
		}
	}
	total := time.Since(began)
	es, cert := obs.stop()
	floor := es
	if cert.After(floor) {
		floor = cert
	}
	f := figure{total: total, floor: floor.Sub(began), err: err}
	if floor.IsZero() {
		f.floor = 0
	}
	testenv.CRDCachesReady(t, "external-secrets.io")
	testenv.CRDCachesReady(t, "cert-manager.io")
	stacktest.Destroy(t, s)
	dropLeases(ctx, t, "kube-system", "cert-manager")
	return f
}

// sh runs a workaround script with the cluster's kubeconfig; $ES and $CERT are manifests of
// the kinds the controllers' webhooks admit.
func sh(ctx context.Context, script string) error {
	dir, err := os.MkdirTemp("", "readiness-figures-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	es, cert := filepath.Join(dir, "es.yaml"), filepath.Join(dir, "cert.yaml")
	_ = os.WriteFile(es, []byte(report001ExternalSecret("default")), 0o644)
	_ = os.WriteFile(cert, []byte(probeCertificate), 0o644)
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+testenv.CP.KubeconfigPath, "ES="+es, "CERT="+cert)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

const probeCertificate = `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: probe, namespace: default}
spec: {secretName: probe-tls, dnsNames: [probe.example.test], issuerRef: {name: selfsigned, kind: ClusterIssuer}}`

// reportsProgram is reports 000 and 001 as one program, for a way and a stage ("releases",
// "resources": the releases and the custom resources, "all").
func reportsProgram(way, stage, esChart, cmChart string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		if way == "autogate" {
			if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "5m"}); err != nil {
				return err
			}
		}
		es, err := stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
			"chart": pulumi.String(esChart), "name": pulumi.String("external-secrets"),
			"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true), "skipAwait": pulumi.Bool(true),
		})
		if err != nil {
			return err
		}
		cm, err := stack.NewHelmRelease(ctx, "cert-manager", pulumi.Map{
			"chart": pulumi.String(cmChart), "name": pulumi.String("cert-manager"),
			"namespace": pulumi.String("cert-manager"), "createNamespace": pulumi.Bool(true), "skipAwait": pulumi.Bool(true),
			"values": pulumi.Map{"installCRDs": pulumi.Bool(true)}, "timeout": pulumi.Int(240),
		})
		if err != nil {
			return err
		}
		if stage == "releases" {
			return nil
		}
		after := func(rs ...pulumi.Resource) pulumi.ResourceOption { return pulumi.DependsOn(rs) }
		esBefore, cmBefore := pulumi.Resource(es), pulumi.Resource(cm)
		if way == "gates" {
			if esBefore, err = readiness.NewHelmReleaseReady(ctx, "external-secrets-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("external-secrets"), Namespace: pulumi.String("external-secrets"), Timeout: pulumi.String("5m"),
			}, after(es)); err != nil {
				return err
			}
			if cmBefore, err = readiness.NewHelmReleaseReady(ctx, "cert-manager-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("cert-manager"), Namespace: pulumi.String("cert-manager"), Timeout: pulumi.String("5m"),
			}, after(cm)); err != nil {
				return err
			}
		}
		for _, ns := range report001Namespaces {
			opts := []pulumi.ResourceOption{after(esBefore)}
			if ns != "default" {
				n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
				if err != nil {
					return err
				}
				opts = append(opts, after(n))
			}
			if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, report001ExternalSecret(ns), opts...); err != nil {
				return err
			}
		}
		selfSigned, err := stack.NewKube(ctx, "selfsigned", "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: selfsigned}\nspec: {selfSigned: {}}", after(cmBefore))
		if err != nil {
			return err
		}
		caCert, err := stack.NewKube(ctx, "readiness-ca", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: readiness-ca, namespace: cert-manager}
spec: {isCA: true, commonName: readiness-ca, secretName: readiness-ca, issuerRef: {name: selfsigned, kind: ClusterIssuer}}`, after(selfSigned))
		if err != nil {
			return err
		}
		caIssuer, err := stack.NewKube(ctx, "ca-issuer", "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: ca-issuer}\nspec: {ca: {secretName: readiness-ca}}", after(caCert))
		if err != nil {
			return err
		}
		nsRes, err := stack.NewKube(ctx, "ns-ai-ops", "apiVersion: v1\nkind: Namespace\nmetadata: {name: ai-ops}")
		if err != nil {
			return err
		}
		cert, err := stack.NewKube(ctx, "ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.ai-ops.svc], issuerRef: {name: ca-issuer, kind: ClusterIssuer}}`, after(caIssuer, nsRes))
		if err != nil {
			return err
		}
		if stage == "resources" {
			return nil
		}
		var before pulumi.Resource = cert
		if way == "gates" {
			if before, err = readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
				Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("ai-ops"), Timeout: pulumi.String("5m"),
			}, after(cert)); err != nil {
				return err
			}
		}
		_, err = stack.NewKube(ctx, "ai-ops-agent", `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}}
    spec:
      containers: [{name: agent, image: readiness.local/pause:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, after(before))
		return err
	}
}

// controllersObserver records when each controller's webhook first admits its kind.
type controllersObserver struct {
	mu       sync.Mutex
	es, cert time.Time
	cancel   context.CancelFunc
	done     chan struct{}
}

func observeControllers(ctx context.Context, t *testing.T) *controllersObserver {
	ctx, cancel := context.WithCancel(ctx)
	o := &controllersObserver{cancel: cancel, done: make(chan struct{})}
	dyn := testenv.Dynamic(t)
	esObj, _ := controlplane.Decode(report001ExternalSecret("default"))
	certObj, _ := controlplane.Decode(probeCertificate)
	esGVR := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	admits := func(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
		obj := &unstructured.Unstructured{Object: u.DeepCopy().Object}
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	}
	go func() {
		defer close(o.done)
		tick := time.NewTicker(10 * time.Millisecond) // the observer's resolution
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			o.mu.Lock()
			esDone, certDone := !o.es.IsZero(), !o.cert.IsZero()
			o.mu.Unlock()
			if !esDone && admits(esGVR, esObj) {
				o.mu.Lock()
				o.es = now
				o.mu.Unlock()
			}
			if !certDone && admits(certGVR, certObj) {
				o.mu.Lock()
				o.cert = now
				o.mu.Unlock()
			}
		}
	}()
	return o
}

func (o *controllersObserver) stop() (es, cert time.Time) {
	o.cancel()
	<-o.done
	return o.es, o.cert
}

// figuresTable is the markdown table of every way's rounds (medians over the successful
// ones; a way that failed says how often).
func figuresTable(ways []string, results map[string][]figure) string {
	var b strings.Builder
	b.WriteString("| way | rounds | failed | up p50 | floor p50 | over the floor p50 | over the floor max |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	names := map[string]string{"autogate": "autoGate's line", "gates": "hand-placed gates",
		"script": "the reports' serial script (`kubectl wait`, sleep-5 loops, three `pulumi up`)", "sleep30": "`sleep 30` after the releases"}
	for _, w := range ways {
		var totals, floors, over []time.Duration
		failed := 0
		for _, f := range results[w] {
			if f.err != nil {
				failed++
				continue
			}
			totals, floors, over = append(totals, f.total), append(floors, f.floor), append(over, f.total-f.floor)
		}
		med := func(d []time.Duration) string {
			if len(d) == 0 {
				return "n/a"
			}
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			return fmt.Sprintf("%.1f s", d[len(d)/2].Seconds())
		}
		mx := "n/a"
		if len(over) > 0 {
			sort.Slice(over, func(i, j int) bool { return over[i] < over[j] })
			mx = fmt.Sprintf("%.1f s", over[len(over)-1].Seconds())
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s |\n", names[w], len(results[w]), failed, med(totals), med(floors), med(over), mx)
	}
	return b.String()
}
