package autogate

// autoGate (issue 24) on the real pulumi-kubernetes plugin: field reports 000, 001 and 002 as one
// ordinary program with no hand-written gate but readiness.AutoGate at its top.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// moments records when the players made something true (a webhook serving, a Secret issued).
type moments struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (m *moments) mark(what string) func() {
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.at == nil {
			m.at = map[string]time.Time{}
		}
		m.at[what] = time.Now()
	}
}

func (m *moments) get(what string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[what]
	return at, ok
}

func TestAutoGateFieldReportsInOneProgram(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)

	// 000: cert-manager (CRDs as a separate earlier step, as report000_test does), its webhook serving.
	cmCRDs, err := tools.ModuleCRDs(ctx, tools.CertManagerModule, "deploy/crds")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmCRDs {
		if _, err := testenv.Resource(t, c).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cmHook := testenv.NewWebhook(t)
	cmHook.Start(t)
	cmObjs, err := charts.Rendered("cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	cmChart, err := charts.Write(t.TempDir(), "cert-manager", charts.Prepare(charts.WithoutCRDs(cmObjs), cmHook.Webhook))
	if err != nil {
		t.Fatal(err)
	}
	aiOps := testenv.Namespace(t, "ai-ops")

	// 001: External Secrets with its CRDs and its webhook, which serves late.
	esoHook := testenv.NewWebhook(t)
	esoCRDs, err := charts.ExternalSecretsCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	esoChart, err := charts.Local(t.TempDir(), "external-secrets", esoHook.Webhook, esoCRDs...)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := []string{"default", "hello-world", "nodejs-demo", "storage-validator"}

	// 002: ingress-nginx as a Chart v4 (its webhook configuration is one of its children).
	nginxHook := testenv.NewWebhook(t)
	nginxChart, err := charts.Local(t.TempDir(), "ingress-nginx", nginxHook.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	nsObj := testenv.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ingress-nginx}")
	if _, err := testenv.Resource(t, nsObj).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	deploymentDoc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ` + aiOps + `}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata:
      labels: {app: ai-ops-agent}
      annotations: {` + fakes.KubeletMountAnnotation + `: 1h}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: registry.local/agent:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`
	ingressDoc := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default, annotations: {pulumi.com/skipAwait: "true"}}
spec:
  ingressClassName: nginx
  rules: [{host: web.example.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]`
	esDoc := func(ns string) string {
		return `apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr-pull-secret, namespace: ` + ns + `}
spec:
  refreshInterval: 1h
  secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}
  target: {name: ghcr-pull-secret}
  dataFrom: [{extract: {key: ghcr}}]`
	}

	program := func(autoGate bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			if autoGate {
				if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "3m"}); err != nil {
					return err
				}
			}
			// 001
			eso, err := stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
				"chart": pulumi.String(esoChart), "name": pulumi.String("external-secrets"),
				"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(180),
			})
			if err != nil {
				return err
			}
			// A user's hand gate in front of one of them: autoGate must leave that one alone.
			hand, err := readiness.NewHelmReleaseReady(ctx, "external-secrets-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("external-secrets"), Namespace: pulumi.String("external-secrets"), Timeout: pulumi.String("3m"),
			}, pulumi.DependsOn([]pulumi.Resource{eso}))
			if err != nil {
				return err
			}
			for _, ns := range namespaces {
				deps := []pulumi.Resource{eso}
				if ns == "storage-validator" {
					deps = append(deps, hand)
				}
				if ns != "default" {
					n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
					if err != nil {
						return err
					}
					deps = append(deps, n)
				}
				if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, esDoc(ns), pulumi.DependsOn(deps)); err != nil {
					return err
				}
			}
			// 000
			cm, err := stack.NewHelmRelease(ctx, "cert-manager", pulumi.Map{
				"chart": pulumi.String(cmChart), "name": pulumi.String("cert-manager"),
				"namespace": pulumi.String("cert-manager"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(180),
			})
			if err != nil {
				return err
			}
			cert, err := stack.NewKube(ctx, "ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: `+aiOps+`}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.example.test], issuerRef: {name: vault-issuer, kind: ClusterIssuer}}`,
				pulumi.DependsOn([]pulumi.Resource{cm}))
			if err != nil {
				return err
			}
			if _, err := stack.NewKube(ctx, "ai-ops-agent", deploymentDoc, pulumi.DependsOn([]pulumi.Resource{cert})); err != nil {
				return err
			}
			// 002
			chart, err := stack.NewChart(ctx, "ingress-nginx", pulumi.Map{"chart": pulumi.String(nginxChart), "namespace": pulumi.String("ingress-nginx")})
			if err != nil {
				return err
			}
			if _, err := stack.NewKube(ctx, "web", ingressDoc, pulumi.DependsOn([]pulumi.Resource{chart})); err != nil {
				return err
			}
			// Near miss: nothing in the stack can block a ConfigMap.
			_, err = stack.NewKube(ctx, "settings", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {a: b}")
			return err
		}
	}

	var m moments
	// run brings s up with the webhooks serving late: late after their Deployments are available.
	run := func(s auto.Stack, late time.Duration) (*fakes.Kubelet, error) {
		k := fakes.PlayKubelet(testenv.CP.Client, aiOps, "app=ai-ops-agent", nil)
		issuer := fakes.IssueWhenCreated(testenv.Dynamic(t), aiOps, "ai-ops-agent", "ai-ops-agent-tls", 12*time.Second, m.mark("issued"))
		esoServe := fakes.ServeWhenAvailable(testenv.CP.Client, esoHook.Webhook, "external-secrets", "external-secrets-webhook", late, m.mark("eso"))
		nginxServe := fakes.ServeWhenAvailable(testenv.CP.Client, nginxHook.Webhook, "ingress-nginx", "ingress-nginx-controller", late, m.mark("nginx"))
		_, err := stacktest.UpErr(s)
		_ = k.Stop()
		for _, p := range []*fakes.Player{issuer, esoServe, nginxServe} {
			if perr := p.Stop(); perr != nil {
				t.Error(perr)
			}
		}
		return k, err
	}
	cleanup := func(s auto.Stack) {
		// The releases delete their CRDs: only once the API server serves their objects from its
		// cache (see testenv.CRDCachesReady).
		testenv.CRDCachesReady(t, "external-secrets.io")
		// The charts' webhooks intercept DELETE too: destroy while they serve.
		_ = esoHook.Webhook.Start()
		_ = nginxHook.Webhook.Start()
		stacktest.Destroy(t, s)
		esoHook.Stop()
		nginxHook.Stop()
		_ = testenv.CP.Client.CoreV1().Secrets(aiOps).Delete(context.Background(), "ai-ops-agent-tls", metav1.DeleteOptions{})
		m = moments{}
	}

	// Without the one line: the reports' errors.
	plain := stacktest.NewStack(t, env, "autogateoff", program(false))
	// A minute late: the stack's dependents meet the webhooks down however slowly the engine
	// creates them on a loaded machine (5 s late, a cold CI run once created them after).
	_, err = run(plain, time.Minute)
	stacktest.RequireFailure(t, err, "failed calling webhook")
	if !strings.Contains(err.Error(), `"validate.externalsecret.external-secrets.io"`) && !strings.Contains(err.Error(), `"validate.nginx.ingress.kubernetes.io"`) {
		t.Fatalf("without autoGate the stack must fail with report 001's or 002's webhook error; got:\n%v", err)
	}
	cleanup(plain)

	// With it, rebuilt: the first up on a fresh cluster succeeds, every dependent after its proof.
	rebuilds := 5
	if testing.Short() {
		rebuilds = 1
	}
	gated := stacktest.NewStack(t, env, "autogate", program(true))
	// Preview shows the gates it will insert, named after what they guard.
	var prev strings.Builder
	if _, err := gated.Preview(context.Background(), optpreview.ProgressStreams(&prev)); err != nil {
		t.Fatalf("preview: %v\n%s", err, prev.String())
	}
	for _, name := range []string{"auto-admission-externalsecrets.external-secrets.io-hello-world-external-secrets",
		"auto-exists-ingress-nginx-ingress-nginx-admission", "auto-admission-ingresses.networking.k8s.io-default-ingress-nginx-ingress-nginx-admission"} {
		if !strings.Contains(prev.String(), name) {
			t.Errorf("preview does not show gate %s:\n%s", name, prev.String())
		}
	}
	for i := 1; i <= rebuilds; i++ {
		k, err := run(gated, 5*time.Second)
		if err != nil {
			t.Fatalf("rebuild %d: %v", i, err)
		}
		if fm := k.FailedMounts(); len(fm) != 0 {
			t.Fatalf("rebuild %d: the pod met report 000's FailedMount: %q", i, fm)
		}
		for _, ns := range namespaces {
			at, ok := m.get("eso")
			if !ok {
				t.Fatalf("rebuild %d: the ESO webhook never served", i)
			}
			stacktest.NotBefore(t, "ExternalSecret "+ns, stacktest.CreatedAt(t, esDoc(ns)), at)
		}
		issued, ok := m.get("issued")
		if !ok {
			t.Fatalf("rebuild %d: the Certificate was never issued", i)
		}
		stacktest.NotBefore(t, "Deployment ai-ops-agent", stacktest.CreatedAt(t, deploymentDoc), issued)
		served, ok := m.get("nginx")
		if !ok {
			t.Fatalf("rebuild %d: the ingress-nginx webhook never served", i)
		}
		stacktest.NotBefore(t, "Ingress web", stacktest.CreatedAt(t, ingressDoc), served)
		if nginxHook.Calls.Load() == 0 || esoHook.Calls.Load() == 0 {
			t.Fatalf("rebuild %d: webhook calls nginx %d, eso %d: objects created without their webhook answering", i, nginxHook.Calls.Load(), esoHook.Calls.Load())
		}

		gates := stacktest.GatesOf(t, gated)
		t.Logf("rebuild %d gates: %s", i, strings.Join(gates, ", "))
		want := []string{
			"AdmissionReady auto-admission-certificates.cert-manager.io-" + aiOps + "-cert-manager",
			"AdmissionReady auto-admission-externalsecrets.external-secrets.io-default-external-secrets",
			"AdmissionReady auto-admission-externalsecrets.external-secrets.io-hello-world-external-secrets",
			"AdmissionReady auto-admission-externalsecrets.external-secrets.io-nodejs-demo-external-secrets",
			"AdmissionReady auto-admission-ingresses.networking.k8s.io-default-ingress-nginx-ingress-nginx-admission",
			"CertificateReady auto-certificate-" + aiOps + "-ai-ops-agent",
			"HelmReleaseReady external-secrets-ready",
			"ResourceReady auto-exists-ingress-nginx-ingress-nginx-admission",
		}
		if !slices.Equal(gates, want) {
			t.Errorf("rebuild %d: gates\n  %s\nwant\n  %s", i, strings.Join(gates, "\n  "), strings.Join(want, "\n  "))
		}
		// Each guards an object's own create, which the program's error hook retries: one round where only Fail webhooks intercept.
		if un := stacktest.UnretriedAdmissions(t, gated); len(un) > 0 {
			t.Errorf("rebuild %d: AdmissionReady gates without retried: %v", i, un)
		}
		cleanup(gated)
		nginxHook.Calls.Store(0)
		esoHook.Calls.Store(0)
	}
}

// A ConfigGroup whose own custom resource its own webhook validates (report 002's APISIX shape):
// the plugin registers its children concurrently, so the custom resource may reach the transform
// before the webhook configuration. Either order in the YAML, autoGate holds the custom resource
// until the webhook answers for it; the webhook serves 3 s after its configuration exists.
func TestAutoGateConfigGroupWebhookAndCustomResourceInEitherOrder(t *testing.T) {
	env := stacktest.Prepare(t)
	for _, order := range []string{"webhook-first", "resource-first"} {
		t.Run(order, func(t *testing.T) {
			group := fmt.Sprintf("ag%d.readiness.test", time.Now().UnixNano()%1_000_000)
			wh := testenv.NewWebhook(t)
			hookName := "widgets-" + strings.Split(group, ".")[0]
			docs := []string{wh.Configuration(hookName, group), testenv.CRD(group, "Widget", "widgets"),
				"apiVersion: " + group + "/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}\n"}
			if order == "resource-first" {
				slices.Reverse(docs)
			}
			s := stacktest.NewStack(t, env, "autogatecg", func(ctx *pulumi.Context) error {
				if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "2m"}); err != nil {
					return err
				}
				_, err := stack.NewConfigGroup(ctx, "app", pulumi.Map{"yaml": pulumi.String(strings.Join(docs, "\n---\n"))})
				return err
			})
			var m moments
			served := make(chan struct{})
			go func() { // plays the webhook's pod: it serves 3 s after its configuration exists
				defer close(served)
				for {
					if _, err := testenv.CP.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), hookName, metav1.GetOptions{}); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(3 * time.Second)
				wh.Start(t)
				m.mark("served")()
			}()
			if _, err := stacktest.UpErr(s); err != nil {
				t.Fatal(err)
			}
			<-served
			at, _ := m.get("served")
			stacktest.NotBefore(t, "Widget w1", stacktest.CreatedAt(t, docs[slices.IndexFunc(docs, func(d string) bool { return strings.HasPrefix(d, "apiVersion: "+group) })]), at)
			if wh.Calls.Load() == 0 {
				t.Fatal("the Widget was created without the webhook answering")
			}
			gates := stacktest.GatesOf(t, s)
			t.Logf("gates: %s", strings.Join(gates, ", "))
			if len(gates) != 2 || !strings.HasPrefix(gates[0], "AdmissionReady auto-admission-widgets."+group+"-default-") || !strings.HasPrefix(gates[1], "ResourceReady auto-exists-") {
				t.Errorf("gates = %v, want the configuration's existence and one AdmissionReady", gates)
			}
			// F9: the exists gate depends on the configuration itself (a child the transform knows
			// only by URN), so on an update it cannot see the configuration's old state.
			hookURN := "urn:pulumi:dev::autogatecg::kubernetes:yaml/v2:ConfigGroup$kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration::app:" + hookName
			if deps := stacktest.DependenciesOf(t, s, "readiness:index:ResourceReady"); !slices.Contains(deps, hookURN) {
				t.Errorf("the exists gate's dependencies %q lack the webhook configuration %s", deps, hookURN)
			}
			stacktest.Destroy(t, s)
		})
	}
}

// A webhook configuration registered (at the top level) after objects it intercepts cannot hold
// them any more: autoGate says which, and how to gate them by hand; an earlier object it does not
// intercept is not named.
func TestAutoGateWarnsOfAWebhookRegisteredAfterWhatItIntercepts(t *testing.T) {
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("late%d.readiness.test", time.Now().UnixNano()%1_000_000)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	wh := testenv.NewWebhook(t)
	wh.Start(t) // serving: this test is about what autoGate says, not about a failure
	hookName := "widgets-" + strings.Split(group, ".")[0]
	s := stacktest.NewStack(t, env, "autogatelate", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, nil); err != nil {
			return err
		}
		widget, err := stack.NewKube(ctx, "early-widget", "apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}")
		if err != nil {
			return err
		}
		settings, err := stack.NewKube(ctx, "early-settings", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: early-settings, namespace: default}")
		if err != nil {
			return err
		}
		// Surely after them (independent registrations of a Go program race to the transform).
		_, err = stack.NewKube(ctx, "late-hook", wh.Configuration(hookName, group), pulumi.DependsOn([]pulumi.Resource{widget, settings}))
		return err
	})
	_, out := stacktest.Up(t, s)
	if !strings.Contains(out, "early-widget was registered before") || !strings.Contains(out, "late-hook, which intercepts it") {
		t.Errorf("no warning naming the Widget registered before the webhook configuration:\n%s", out)
	}
	if strings.Contains(out, "early-settings was registered before") {
		t.Errorf("the ConfigMap no webhook intercepts was named:\n%s", out)
	}
	stacktest.Destroy(t, s)
}

// What autoGate costs a stack with nothing to wait for: 20 top-level ConfigMaps and a ConfigGroup
// of 20 more, `up` with and without the line, alternated. Figures only (logged, not asserted: the
// machine's load decides them); run with READINESS_MEASURE_AUTOGATE=1.
func TestAutoGateOverheadFigures(t *testing.T) {
	if os.Getenv("READINESS_MEASURE_AUTOGATE") == "" {
		t.Skip("set READINESS_MEASURE_AUTOGATE=1 to measure")
	}
	env := stacktest.Prepare(t)
	program := func(autoGate bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			if autoGate {
				if err := readiness.AutoGate(ctx, nil); err != nil {
					return err
				}
			}
			var docs []string
			for i := 0; i < 20; i++ {
				if _, err := stack.NewKube(ctx, fmt.Sprintf("top-%d", i), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: top-%d, namespace: default}", i)); err != nil {
					return err
				}
				docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: grouped-%d, namespace: default}", i))
			}
			_, err := stack.NewConfigGroup(ctx, "group", pulumi.Map{"yaml": pulumi.String(strings.Join(docs, "\n---\n"))})
			return err
		}
	}
	times := map[bool][]time.Duration{}
	for trial := 0; trial < 3; trial++ {
		for _, on := range []bool{false, true} {
			s := stacktest.NewStack(t, env, fmt.Sprintf("overhead%v", on), program(on))
			began := time.Now()
			stacktest.Up(t, s)
			times[on] = append(times[on], time.Since(began))
			stacktest.Destroy(t, s)
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	t.Logf("up of 40 ConfigMaps (20 in a ConfigGroup): without autoGate %v (median %v), with %v (median %v)",
		times[false], median(times[false]), times[true], median(times[true]))
}

// A gate autoGate inserted that fails (the webhook never serves; timeout 5s) fails the stack with
// the gate's error: the custom resource it held is not created, and nothing hangs.
func TestAutoGateFailingGateFailsTheStack(t *testing.T) {
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("agf%d.readiness.test", time.Now().UnixNano()%1_000_000)
	wh := testenv.NewWebhook(t) // never started
	hookName := "widgets-" + strings.Split(group, ".")[0]
	yaml := strings.Join([]string{wh.Configuration(hookName, group), testenv.CRD(group, "Widget", "widgets"),
		"apiVersion: " + group + "/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}\n"}, "\n---\n")
	s := stacktest.NewStack(t, env, "autogatefail", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "5s"}); err != nil {
			return err
		}
		_, err := stack.NewConfigGroup(ctx, "app", pulumi.Map{"yaml": pulumi.String(yaml)})
		return err
	})
	_, err := stacktest.UpErr(s)
	stacktest.RequireFailure(t, err, "readiness:index:AdmissionReady", "auto-admission-widgets."+group+"-default-")
	w := testenv.Object(t, "apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}")
	if _, gerr := testenv.Resource(t, w).Get(context.Background(), "w1", metav1.GetOptions{}); !apierrors.IsNotFound(gerr) {
		t.Fatalf("the Widget behind the failed gate exists (or could not be read: %v)", gerr)
	}
	stacktest.Destroy(t, s)
}

// A sidecar injector installed by the stack (a mutating webhook on the Pods of one namespace,
// failurePolicy Ignore: while it is down the API server admits Pods without their sidecar) and
// a Deployment after it: autoGate holds the Deployment until a Pod like its template is admitted
// with the injector answering.
func TestAutoGateHoldsAWorkloadForItsPodsInjector(t *testing.T) {
	env := stacktest.Prepare(t)
	ns := testenv.Namespace(t, "agi")
	testenv.ServiceAccountReady(t, ns)
	injector := testenv.NewWebhook(t)
	injector.Mode.Store("inject:sidecar")
	cfgName := "injector-" + ns
	cfg := strings.Replace(injector.ConfigurationFor("MutatingWebhookConfiguration", cfgName, "", "pods"), "failurePolicy: Fail", "failurePolicy: Ignore", 1)
	cfg = strings.Replace(cfg, "- name: mutating."+cfgName+".\n", "- name: mutating."+cfgName+".pods.test\n", 1)
	cfg = strings.Replace(cfg, "  rules:", "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+ns+"}}\n  rules:", 1)
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: web, image: registry.local/web:1}]}`
	s := stacktest.NewStack(t, env, "autogateinject", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "2m"}); err != nil {
			return err
		}
		hook, err := stack.NewKube(ctx, "injector", cfg)
		if err != nil {
			return err
		}
		_, err = stack.NewKube(ctx, "web", deployment, pulumi.DependsOn([]pulumi.Resource{hook}))
		return err
	})
	var m moments
	served := make(chan struct{})
	go func() { // the injector's pod serves 3 s after its configuration exists
		defer close(served)
		for {
			if _, err := testenv.CP.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), cfgName, metav1.GetOptions{}); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)
		injector.Start(t)
		m.mark("served")()
	}()
	if _, err := stacktest.UpErr(s); err != nil {
		t.Fatal(err)
	}
	<-served
	at, _ := m.get("served")
	stacktest.NotBefore(t, "Deployment web", stacktest.CreatedAt(t, deployment), at)
	gates := stacktest.GatesOf(t, s)
	if !slices.Contains(gates, "AdmissionReady auto-admission-pods-"+ns+"-injector") {
		t.Errorf("gates = %v, want the injector's pod gate", gates)
	}
	stacktest.Destroy(t, s)
}
