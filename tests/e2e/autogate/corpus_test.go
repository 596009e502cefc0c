package autogate

// Issue 32: autoGate on programs as Pulumi users write them, on the real pulumi-kubernetes
// plugin: autonamed objects and installers, workloads of every kind behind a pod webhook,
// every way a pod names a Secret, an autonamed Release, and what a release's pods consume.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// stateOf is the stack's resources with their inputs, by Pulumi name.
func stateOf(t *testing.T, s auto.Stack) map[string]map[string]any {
	t.Helper()
	dep, err := s.Export(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Resources []struct {
			URN      string         `json:"urn"`
			Inputs   map[string]any `json:"inputs"`
			Outputs  map[string]any `json:"outputs"`
			Provider string         `json:"provider"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(dep.Deployment, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range d.Resources {
		out[resource.URN(r.URN).Name()] = map[string]any{"inputs": r.Inputs, "outputs": r.Outputs, "provider": r.Provider}
	}
	return out
}

// nameOf is an exported object's real name (the stack exports every autonamed object's).
func nameOf(t *testing.T, res auto.UpResult, key string) string {
	t.Helper()
	n, _ := res.Outputs[key].Value.(string)
	if n == "" {
		t.Fatalf("no output %s", key)
	}
	return n
}

// serveWhenLabelled plays a webhook's pod: it serves `after` a webhook configuration of kind
// labelled corpus=<label> exists (the configuration is autonamed: its name is not known here).
func serveWhenLabelled(t *testing.T, wh *testenv.Webhook, resourceName, label string, after time.Duration, m *moments, what string) {
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resourceName}
	go func() {
		for {
			l, err := testenv.Dynamic(t).Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: "corpus=" + label})
			if err == nil && len(l.Items) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(after)
		wh.Start(t)
		m.mark(what)()
	}()
}

func TestAutoGateCorpusAutonamedAndEveryWorkload(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	ns := testenv.Namespace(t, "corpus")
	stsNS := testenv.Namespace(t, "corpus-sts")
	esNS := testenv.Namespace(t, "corpus-es")
	testenv.ServiceAccountReady(t, ns)
	testenv.ServiceAccountReady(t, esNS)
	testenv.ServiceAccountReady(t, stsNS)
	esoCRDs, err := charts.ExternalSecretsCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range esoCRDs {
		if _, err := testenv.Resource(t, c).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	label := fmt.Sprintf("c%d", time.Now().UnixNano()%1_000_000)
	group := label + ".readiness.test"

	// The widgets' validating webhook (autonamed configuration), and a sidecar injector on the
	// Pods of both namespaces (failurePolicy Ignore: down, it lets Pods through without sidecar).
	widgets := testenv.NewWebhook(t)
	widgetHook := strings.Replace(widgets.Configuration("x", group), "metadata: {name: x}", "metadata: {labels: {corpus: "+label+"}}", 1)
	injector := testenv.NewWebhook(t)
	injector.Mode.Store("inject:sidecar")
	injectorDoc := strings.Replace(injector.ConfigurationFor("MutatingWebhookConfiguration", "injector-"+label, "", "pods"), "failurePolicy: Fail", "failurePolicy: Ignore", 1)
	injectorDoc = strings.Replace(injectorDoc, "- name: mutating.injector-"+label+".\n", "- name: mutating.injector-"+label+".pods.test\n", 1)
	injectorDoc = strings.Replace(injectorDoc, "  rules:", "  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: ["+ns+", "+stsNS+"]}]}\n  rules:", 1)
	injectorDoc = strings.Replace(injectorDoc, "metadata: {name: injector-"+label+"}", "metadata: {labels: {corpus: "+label+"-pods}}", 1)

	// A chart for an autonamed Release.
	chartObj := testenv.Object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: chart-settings}\ndata: {a: b}")
	chartPath, err := charts.Write(t.TempDir(), "tiny", []*unstructured.Unstructured{chartObj})
	if err != nil {
		t.Fatal(err)
	}

	skipAwait := map[string]any{"pulumi.com/skipAwait": "true"}
	podSpec := func(extra map[string]any) map[string]any {
		spec := map[string]any{"nodeSelector": map[string]any{"type": "kwok"},
			"containers": []any{map[string]any{"name": "app", "image": "registry.local/app:1"}}}
		for k, v := range extra {
			spec[k] = v
		}
		return spec
	}
	template := func(app string, extra map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": app}}, "spec": podSpec(extra)}
	}
	selector := func(app string) map[string]any { return map[string]any{"matchLabels": map[string]any{"app": app}} }
	workloads := map[string]map[string]any{ // by Pulumi name; all autonamed
		"web-rs": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": map[string]any{"namespace": ns, "annotations": skipAwait},
			"spec": map[string]any{"replicas": 1, "selector": selector("rs"), "template": template("rs", nil)}},
		"agent-ds": {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"namespace": ns, "annotations": skipAwait},
			"spec": map[string]any{"selector": selector("ds"), "template": template("ds", map[string]any{"hostNetwork": true})}},
		"migrate-job": {"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"namespace": ns, "annotations": skipAwait},
			"spec": map[string]any{"completionMode": "Indexed", "completions": 2, "parallelism": 1,
				"template": map[string]any{"spec": podSpec(map[string]any{"restartPolicy": "Never"})}}},
		"nightly-cron": {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": map[string]any{"namespace": ns, "annotations": skipAwait},
			"spec": map[string]any{"schedule": "0 3 * * *", "jobTemplate": map[string]any{"spec": map[string]any{
				"template": map[string]any{"spec": podSpec(map[string]any{"restartPolicy": "OnFailure"})}}}}},
		// In a namespace of its own, so its Pod is its gate's own representative: a StatefulSet whose
		// container mounts a volumeClaimTemplate (the Pod as written, without the claim's volume,
		// is refused as invalid).
		"db-sts": {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"namespace": stsNS, "annotations": skipAwait},
			"spec": map[string]any{"serviceName": "db", "replicas": 1, "selector": selector("db"),
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "db"}}, "spec": map[string]any{
					"nodeSelector": map[string]any{"type": "kwok"},
					"containers": []any{map[string]any{"name": "db", "image": "registry.local/db:1",
						"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data"}}}}}},
				"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"},
					"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}}},
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range workloads {
			if !yield(k) {
				return
			}
		}
	})

	s := stacktest.NewStack(t, env, "autogatecorpus", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "2m"}); err != nil {
			return err
		}
		crd, err := stack.NewKube(ctx, "widgets-crd", testenv.CRD(group, "Widget", "widgets"))
		if err != nil {
			return err
		}
		hook, err := stack.NewKube(ctx, "widgets-hook", widgetHook)
		if err != nil {
			return err
		}
		widget, err := stack.NewKubeFrom(ctx, "widget", map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"namespace": ns}, "spec": map[string]any{"size": 1}}, pulumi.DependsOn([]pulumi.Resource{crd, hook}))
		if err != nil {
			return err
		}
		ctx.Export("widget", widget.Metadata.MapIndex(pulumi.String("name")))
		ctx.Export("widgetsHook", hook.Metadata.MapIndex(pulumi.String("name")))

		inj, err := stack.NewKube(ctx, "injector", injectorDoc)
		if err != nil {
			return err
		}
		for _, name := range names {
			w, err := stack.NewKubeFrom(ctx, name, workloads[name], pulumi.DependsOn([]pulumi.Resource{inj}))
			if err != nil {
				return err
			}
			ctx.Export(name, w.Metadata.MapIndex(pulumi.String("name")))
		}

		// Field report 001's pull secret, by an ExternalSecret; a pod that pulls with it, and one
		// whose ServiceAccount does.
		es, err := stack.NewKube(ctx, "ghcr-pull", `apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {namespace: `+esNS+`}
spec: {refreshInterval: 1h, secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}, target: {name: ghcr-pull-secret}, dataFrom: [{extract: {key: ghcr}}]}`)
		if err != nil {
			return err
		}
		ctx.Export("es", es.Metadata.MapIndex(pulumi.String("name")))
		sa, err := stack.NewKube(ctx, "builder", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: builder, namespace: "+esNS+"}\nimagePullSecrets: [{name: ghcr-pull-secret}]")
		if err != nil {
			return err
		}
		// Issue 47: the same ServiceAccount autonamed, and a pod that runs as it by the name it got.
		saAuto, err := stack.NewKube(ctx, "builder-auto", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {namespace: "+esNS+"}\nimagePullSecrets: [{name: ghcr-pull-secret}]")
		if err != nil {
			return err
		}
		for name, extra := range map[string]map[string]any{
			"pulls":          {"imagePullSecrets": []any{map[string]any{"name": "ghcr-pull-secret"}}},
			"pulls-via":      {"serviceAccountName": "builder"},
			"pulls-via-auto": {"serviceAccountName": saAuto.Metadata.MapIndex(pulumi.String("name"))},
		} {
			d, err := stack.NewKubeFrom(ctx, name, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"namespace": esNS, "annotations": skipAwait},
				"spec":     map[string]any{"selector": selector(name), "template": template(name, extra)}},
				pulumi.DependsOn([]pulumi.Resource{es, sa}))
			if err != nil {
				return err
			}
			ctx.Export(name, d.Metadata.MapIndex(pulumi.String("name")))
		}

		// An autonamed Release; a Deployment after it waits for it, a Secret its pods could mount does not.
		rel, err := stack.NewHelmRelease(ctx, "tiny", pulumi.Map{"chart": pulumi.String(chartPath), "namespace": pulumi.String(ns)})
		if err != nil {
			return err
		}
		ctx.Export("release", rel.Name)
		if _, err := stack.NewKube(ctx, "after-release", "apiVersion: v1\nkind: Secret\nmetadata: {namespace: "+ns+"}\nstringData: {password: x}",
			pulumi.DependsOn([]pulumi.Resource{rel})); err != nil {
			return err
		}
		if _, err := stack.NewKubeFrom(ctx, "after-release-app", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"namespace": esNS, "annotations": skipAwait},
			"spec":     map[string]any{"selector": selector("after"), "template": template("after", nil)}},
			pulumi.DependsOn([]pulumi.Resource{rel})); err != nil {
			return err
		}
		// Near miss: nothing can block an autonamed ConfigMap.
		_, err = stack.NewKube(ctx, "plain-settings", "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: "+ns+"}\ndata: {a: b}")
		return err
	})

	var m moments
	serveWhenLabelled(t, widgets, "validatingwebhookconfigurations", label, 3*time.Second, &m, "widgets")
	serveWhenLabelled(t, injector, "mutatingwebhookconfigurations", label+"-pods", 3*time.Second, &m, "injector")
	esSynced := make(chan struct{})
	go func() { // plays External Secrets: 3 s after the (autonamed) ExternalSecret appears, its Secret
		defer close(esSynced)
		gvr := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
		for {
			l, err := testenv.Dynamic(t).Resource(gvr).Namespace(esNS).List(context.Background(), metav1.ListOptions{})
			if err == nil && len(l.Items) > 0 {
				p := fakes.SyncExternalSecrets(testenv.Dynamic(t), l.Items[0].GetName(), []string{esNS}, 3*time.Second)
				for {
					if _, err := testenv.CP.Client.CoreV1().Secrets(esNS).Get(context.Background(), "ghcr-pull-secret", metav1.GetOptions{}); err == nil {
						m.mark("synced")()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				// The player writes the status after the Secret: let it finish (stopping it now
				// would cancel that write, and the gate would rightly never see Ready).
				wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := p.Wait(wctx); err != nil {
					t.Errorf("playing External Secrets: %v", err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	res, out := stacktest.Up(t, s)
	<-esSynced
	destroyed := false
	defer func() {
		if !destroyed {
			stacktest.Destroy(t, s)
		}
	}()

	created := func(gvr schema.GroupVersionResource, namespace, name string) time.Time {
		t.Helper()
		u, err := testenv.Dynamic(t).Resource(gvr).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s/%s: %v", gvr.Resource, namespace, name, err)
		}
		return u.GetCreationTimestamp().Time
	}
	at := func(what string) time.Time {
		t.Helper()
		v, ok := m.get(what)
		if !ok {
			t.Fatalf("%s never happened", what)
		}
		return v
	}

	// Autonamed: the Widget is dry-run under a name of the provider's shape and created after its
	// webhook answered; the exists gate looked for the configuration's real (autonamed) name.
	widget := nameOf(t, res, "widget")
	if !strings.HasPrefix(widget, "widget-") || len(widget) != len("widget-")+8 {
		t.Errorf("the Widget's name %q is not pulumi-kubernetes' autoname", widget)
	}
	stacktest.NotBefore(t, "Widget "+widget, created(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, ns, widget), at("widgets"))
	if widgets.Calls.Load() == 0 {
		t.Error("the Widget was created without its webhook answering")
	}
	state := stateOf(t, s)
	hookName := nameOf(t, res, "widgetsHook")
	exists := state["auto-exists-widgets-hook"]
	if exists == nil {
		t.Fatalf("no exists gate for the autonamed webhook configuration; resources: %v", slices.Sorted(mapKeys(state)))
	}
	if got := exists["inputs"].(map[string]any)["name"]; got != hookName {
		t.Errorf("the exists gate waited for %v, want the configuration's real name %s (never its Pulumi name)", got, hookName)
	}

	// Every workload kind: created after the injector answered for a Pod like its controller's.
	for _, name := range names {
		stacktest.NotBefore(t, name, created(gvrOf(workloads[name]), workloads[name]["metadata"].(map[string]any)["namespace"].(string), nameOf(t, res, name)), at("injector"))
	}
	gates := stacktest.GatesOf(t, s)
	for _, want := range []string{"AdmissionReady auto-admission-pods-" + ns + "-injector", "AdmissionReady auto-admission-pods-" + stsNS + "-injector"} {
		if !slices.Contains(gates, want) {
			t.Errorf("gates %v lack %s", gates, want)
		}
	}

	// Pull secrets: both Deployments after the ExternalSecret's Secret exists.
	for _, name := range []string{"pulls", "pulls-via", "pulls-via-auto"} {
		stacktest.NotBefore(t, "Deployment "+name, created(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, esNS, nameOf(t, res, name)), at("synced"))
	}
	esGate := state["auto-externalsecret-"+esNS+"-ghcr-pull"]
	if esGate == nil || esGate["inputs"].(map[string]any)["name"] != nameOf(t, res, "es") {
		t.Errorf("ExternalSecretReady of the autonamed ExternalSecret = %v, want its name %s from its outputs", esGate, nameOf(t, res, "es"))
	}

	// The autonamed Release's gate names the release Helm installed; the Secret is not held for it.
	relGate := state["auto-helmrelease-"+ns+"-tiny"]
	if relGate == nil || relGate["inputs"].(map[string]any)["name"] != nameOf(t, res, "release") {
		t.Errorf("HelmReleaseReady of the autonamed Release = %v, want the release's name %s from its outputs", relGate, nameOf(t, res, "release"))
	}
	if !strings.Contains(out, "would wait for itself") {
		t.Errorf("no warning that the Secret after the Release is not held:\n%s", out)
	}

	// Near miss: nothing gated the ConfigMap; one readiness provider for the plan and every gate.
	if strings.Contains(strings.Join(gates, " "), "plain-settings") {
		t.Errorf("the ConfigMap got a gate: %v", gates)
	}
	var providers []string
	for _, r := range stacktest.StateOf(t, s) {
		if r.Type == "pulumi:providers:readiness" {
			providers = append(providers, r.URN)
		}
	}
	if len(providers) != 1 {
		t.Errorf("readiness providers %v, want one (the SDK's versioned default, for the plan and the gates)", providers)
	}
	t.Logf("gates: %s", strings.Join(gates, ", "))

	// Destroy in the order autoGate made on up: the state records the gates it added (the
	// Widget depends on its AdmissionReady, which depends on the webhook configuration), so
	// the Widget goes first, then its gate, then the configuration.
	admissionGate := "auto-admission-widgets." + group + "-" + ns + "-widgets-hook"
	for _, r := range stacktest.StateOf(t, s) {
		if r.Type == "kubernetes:"+group+"/v1:Widget" && !slices.ContainsFunc(r.Dependencies, func(d string) bool { return strings.HasSuffix(d, "::"+admissionGate) }) {
			t.Errorf("the state does not record the Widget's gate %s among its dependencies %q: destroy cannot order them", admissionGate, r.Dependencies)
		}
	}
	var log strings.Builder
	_, err = s.Destroy(context.Background(), optdestroy.ProgressStreams(&log))
	destroyed = true
	if err != nil {
		t.Fatalf("destroy: %v\n%s", err, log.String())
	}
	pos := func(what string) int {
		i := strings.Index(log.String(), what)
		if i < 0 {
			t.Fatalf("destroy never said %q:\n%s", what, log.String())
		}
		return i
	}
	if !(pos("Widget widget deleted") < pos(admissionGate+" deleting") && pos(admissionGate+" deleted") < pos("ValidatingWebhookConfiguration widgets-hook deleting")) {
		t.Errorf("destroy did not delete the Widget, then its gate, then the webhook configuration:\n%s", log.String())
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func gvrOf(obj map[string]any) schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(obj["apiVersion"].(string))
	return gv.WithResource(strings.ToLower(obj["kind"].(string)) + "s")
}
