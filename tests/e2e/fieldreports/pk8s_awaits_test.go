package fieldreports

// What pulumi-kubernetes (the real plugin) waits for by itself, pinned so that
// docs/pulumi-kubernetes.md can say which gate goes after each resource.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
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

// TestPulumiKubernetesOwnWaits runs its two stacks in one prepared environment (one build of the
// providers).
func TestPulumiKubernetesOwnWaits(t *testing.T) {
	env := stacktest.Prepare(t)
	t.Run("Annotations", func(t *testing.T) { annotationsAndSkipAwait(t, env) })
	t.Run("GateAfterADeniedChart", func(t *testing.T) { gateAfterADeniedChart(t, env) })
}

// annotationsAndSkipAwait: one stack, two `up`s, each behaviour a branch of its own.
//
// First up (continueOnError, so every branch runs to its end):
//   - yaml/v2:ConfigFile holding a Widget and, after it in the file, the Widget's CRD: it creates
//     the CRD first (the same kind ordering as ConfigGroup); the Widget's
//     `pulumi.com/waitFor: condition=Ready` holds the ConfigFile until a controller marks it
//     Ready, so a ConfigMap after the ConfigFile comes after that;
//   - `pulumi.com/waitFor: condition=Available` on a webhook's Deployment: it watches the
//     Deployment, which is available before the webhook serves, so the Gadget after it fails with
//     `failed calling webhook` (waitFor cannot prove serving);
//   - helm.sh/v3:Release with `skipAwait: true` of a Deployment whose pods never become ready:
//     the Release succeeds; HelmReleaseReady after it times out (the gate is what blocks) and the
//     ConfigMap after the gate is not created;
//   - `pulumi.com/skipAwait: "true"` on such a Deployment: created, never awaited.
//
// Second up, with the webhook serving and the kubelet making the pods ready: the gate passes
// once they are, and the stack succeeds.
func annotationsAndSkipAwait(t *testing.T, env *stack.Env) {
	ctx := context.Background()
	ns := testenv.Namespace(t, "awaits")
	group := fmt.Sprintf("aw%d.readiness.test", time.Now().UnixNano()%1_000_000)
	// Gadgets go to a webhook that does not serve during the first up.
	gadgetHook := testenv.NewWebhook(t)
	testenv.Apply(t, testenv.CRD(group, "Gadget", "gadgets"))

	// The ConfigFile: the Widget first, its CRD after it.
	file := filepath.Join(t.TempDir(), "widgets.yaml")
	widgetYAML := "apiVersion: " + group + "/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: " + ns +
		"\n  annotations: {pulumi.com/waitFor: condition=Ready}\nspec: {size: 1}\n---\n" + testenv.CRD(group, "Widget", "widgets")
	if err := os.WriteFile(file, []byte(widgetYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	idle := func(name, annotations string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `, annotations: {` + annotations + `}}
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}, annotations: {` + fakes.KubeletMountAnnotation + `: 1h}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: app, image: registry.local/idle:1}]}`
	}
	idleChart, err := charts.Write(t.TempDir(), "idle", []*unstructured.Unstructured{testenv.Object(t, idle("idle", ""))})
	if err != nil {
		t.Fatal(err)
	}
	program := func(gateTimeout string) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			after := func(name string, dep pulumi.Resource) error {
				_, err := stack.NewKube(ctx, name, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: "+ns+"}\ndata: {a: b}",
					pulumi.DependsOn([]pulumi.Resource{dep}))
				return err
			}
			// ConfigFile + waitFor on a custom resource.
			widgets, err := stack.NewConfigFile(ctx, "widgets", pulumi.Map{"file": pulumi.String(file)})
			if err != nil {
				return err
			}
			if err := after("after-widgets", widgets); err != nil {
				return err
			}
			// waitFor on a webhook's Deployment, then an object the webhook validates.
			hookDeploy, err := stack.NewKube(ctx, "gadget-webhook", `apiVersion: apps/v1
kind: Deployment
metadata: {name: gadget-webhook, namespace: `+ns+`, annotations: {pulumi.com/waitFor: condition=Available}}
spec:
  selector: {matchLabels: {app: gadget-webhook}}
  template:
    metadata: {labels: {app: gadget-webhook}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: webhook, image: registry.local/webhook:1}]}`)
			if err != nil {
				return err
			}
			hookCfg, err := stack.NewKube(ctx, "gadget-webhook-cfg", gadgetHook.ConfigurationFor("ValidatingWebhookConfiguration",
				"gadgets-"+strings.Split(group, ".")[0], group, "gadgets"))
			if err != nil {
				return err
			}
			if _, err := stack.NewKube(ctx, "g1", "apiVersion: "+group+"/v1\nkind: Gadget\nmetadata: {name: g1, namespace: "+ns+"}\nspec: {size: 1}",
				pulumi.DependsOn([]pulumi.Resource{hookDeploy, hookCfg})); err != nil {
				return err
			}
			// A Release with skipAwait, its gate, and what follows the gate.
			release, err := stack.NewHelmRelease(ctx, "idle", pulumi.Map{"chart": pulumi.String(idleChart), "name": pulumi.String("idle"),
				"namespace": pulumi.String(ns), "skipAwait": pulumi.Bool(true), "timeout": pulumi.Int(10)})
			if err != nil {
				return err
			}
			gate, err := readiness.NewHelmReleaseReady(ctx, "idle-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("idle"), Namespace: pulumi.String(ns), Timeout: pulumi.String(gateTimeout),
			}, pulumi.DependsOn([]pulumi.Resource{release}))
			if err != nil {
				return err
			}
			if err := after("after-idle-ready", gate); err != nil {
				return err
			}
			// The skipAwait annotation on a Deployment whose pods never become ready.
			if _, err := stack.NewKube(ctx, "idle-direct", idle("idle-direct", `pulumi.com/skipAwait: "true"`)); err != nil {
				return err
			}
			return nil
		}
	}

	// The Widget's controller: Ready 2 s after the Widget exists.
	var readyAt atomic.Pointer[time.Time]
	widgets := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	playCtx, stopPlay := context.WithCancel(ctx)
	defer stopPlay()
	played := make(chan error, 1)
	go func() {
		played <- func() error {
			var w *unstructured.Unstructured
			for {
				var err error
				if w, err = widgets.Get(playCtx, "w1", metav1.GetOptions{}); err == nil {
					break
				}
				select {
				case <-playCtx.Done():
					return nil
				case <-time.After(100 * time.Millisecond): // the harness plays a controller's loop
				}
			}
			select {
			case <-playCtx.Done():
				return nil
			case <-time.After(2 * time.Second):
			}
			w.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True",
				"reason": "Reconciled", "observedGeneration": w.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
			now := time.Now()
			readyAt.Store(&now)
			_, err := widgets.UpdateStatus(playCtx, w, metav1.UpdateOptions{})
			return err
		}()
	}()

	s := stacktest.NewStack(t, env, "awaits", program("5s"))
	var out strings.Builder
	t0 := time.Now()
	_, err = s.Up(ctx, optup.ContinueOnError(), optup.ProgressStreams(&out))
	t.Logf("first up: %s", time.Since(t0).Round(100*time.Millisecond))
	stopPlay()
	if err := <-played; err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatalf("the first up must fail (webhook not serving, a gate timing out); it succeeded:\n%s", out.String())
	}
	log := err.Error() + "\n" + out.String()
	for _, want := range []string{
		// waitFor on the webhook's Deployment did not make the webhook serve.
		`failed calling webhook "validating.gadgets-`, "connection refused",
		// The Release returned with its pods not ready; the gate after it is what waited.
		"readiness:index:HelmReleaseReady (idle-ready)", "timed out after",
		"Deployment " + ns + "/idle: 0 of 1 updated replicas are available",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("the first up's output lacks %q:\n%s", want, log)
		}
	}
	state := map[string]bool{}
	for _, r := range stacktest.StateOf(t, s) {
		state[r.Type+" "+resource.URN(r.URN).Name()] = true
	}
	for name, want := range map[string]bool{
		"kubernetes:helm.sh/v3:Release idle":            true, // skipAwait: succeeded with no pod ready
		"kubernetes:apps/v1:Deployment idle-direct":     true, // the skipAwait annotation
		"kubernetes:apps/v1:Deployment gadget-webhook":  true, // waitFor condition=Available: passed
		"kubernetes:core/v1:ConfigMap after-widgets":    true,
		"readiness:index:HelmReleaseReady idle-ready":   false, // timed out
		"kubernetes:core/v1:ConfigMap after-idle-ready": false,
		"kubernetes:" + group + "/v1:Gadget g1":         false,
	} {
		if state[name] != want {
			t.Errorf("after the first up, %s in the state = %v, want %v", name, state[name], want)
		}
	}
	// waitFor held the ConfigFile until the Widget was Ready.
	cm, err := testenv.CP.Client.CoreV1().ConfigMaps(ns).Get(ctx, "after-widgets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if at := readyAt.Load(); at == nil {
		t.Fatal("the Widget was never marked Ready")
	} else {
		stacktest.NotBefore(t, "the ConfigMap after the ConfigFile", cm.CreationTimestamp.Time, *at)
	}

	// Second up: the webhook serves, the kubelet makes the Release's pods ready.
	gadgetHook.Start(t)
	kubelet := fakes.PlayKubelet(testenv.CP.Client, ns, "app=idle", nil)
	defer func() { _ = kubelet.Stop() }()
	s = stacktest.NewStack(t, env, "awaits", program("2m"))
	t0 = time.Now()
	if _, err := stacktest.UpErr(s); err != nil {
		t.Fatal(err)
	}
	t.Logf("second up: %s", time.Since(t0).Round(100*time.Millisecond))
	if _, err := testenv.CP.Client.CoreV1().ConfigMaps(ns).Get(ctx, "after-idle-ready", metav1.GetOptions{}); err != nil {
		t.Errorf("after the second up: %v", err)
	}
	t0 = time.Now()
	stacktest.Destroy(t, s)
	t.Logf("destroy: %s", time.Since(t0).Round(100*time.Millisecond))
}

// gateAfterADeniedChart: a helm.sh/v4:Chart whose object a webhook denies. `pulumi up` fails at
// once with the webhook's denial as pulumi-kubernetes reports it; the gate that depends on the
// Chart (timeout 10m) is never created, nor what follows it, so nothing hangs. The Chart
// component itself is reported created (its Construct returns with a child failed): with
// `--continue-on-error` the engine then runs what depends on the Chart, and the gate after it
// waits out its own timeout (3 s in that run) for an object that was never created.
func gateAfterADeniedChart(t *testing.T, env *stack.Env) {
	ns := testenv.Namespace(t, "denied")
	group := fmt.Sprintf("dn%d.readiness.test", time.Now().UnixNano()%1_000_000)
	testenv.Apply(t, testenv.CRD(group, "Sprocket", "sprockets"))
	hook := testenv.NewWebhook(t)
	hook.Mode.Store("deny")
	hook.Start(t)
	hookName := hook.RegisterAs(t, "ValidatingWebhookConfiguration", "sprockets-"+strings.Split(group, ".")[0], "Fail", group, "sprockets")
	chart, err := charts.Write(t.TempDir(), "sprockets", []*unstructured.Unstructured{
		testenv.Object(t, "apiVersion: "+group+"/v1\nkind: Sprocket\nmetadata: {name: s1, namespace: "+ns+"}\nspec: {size: 1}")})
	if err != nil {
		t.Fatal(err)
	}
	program := func(gateTimeout string) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			c, err := stack.NewChart(ctx, "sprockets", pulumi.Map{"chart": pulumi.String(chart), "namespace": pulumi.String(ns)})
			if err != nil {
				return err
			}
			gate, err := readiness.NewResourceReady(ctx, "s1-ready", &readiness.ResourceReadyArgs{
				ApiVersion: pulumi.String(group + "/v1"), Kind: pulumi.String("Sprocket"), Name: pulumi.String("s1"),
				Namespace: pulumi.String(ns), Exists: pulumi.Bool(true), Timeout: pulumi.String(gateTimeout),
			}, pulumi.DependsOn([]pulumi.Resource{c}))
			if err != nil {
				return err
			}
			_, err = stack.NewKube(ctx, "after-s1-ready", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-s1-ready, namespace: "+ns+"}",
				pulumi.DependsOn([]pulumi.Resource{gate}))
			return err
		}
	}
	s := stacktest.NewStack(t, env, "denied", program("10m"))
	_, err = stacktest.UpErr(s)
	stacktest.RequireFailure(t, err, "kubernetes:"+group+"/v1:Sprocket (sprockets:"+ns+"/s1)", `admission webhook "`+hookName+`" denied the request`)
	if strings.Contains(err.Error(), "s1-ready creating") {
		t.Fatalf("the gate after the denied Chart was started:\n%v", err)
	}
	gates := stacktest.GatesOf(t, s)
	if len(gates) != 0 {
		t.Fatalf("gates in the state after the denied Chart: %v", gates)
	}

	// --continue-on-error: the gate after the Chart runs, and fails by its own timeout.
	s = stacktest.NewStack(t, env, "denied", program("3s"))
	var out strings.Builder
	_, err = s.Up(context.Background(), optup.ContinueOnError(), optup.ProgressStreams(&out))
	stacktest.RequireFailure(t, err, `admission webhook "`+hookName+`" denied the request`)
	if !strings.Contains(out.String(), "readiness:index:ResourceReady s1-ready creating") || !strings.Contains(out.String(), "timed out after 3") {
		t.Fatalf("with --continue-on-error the gate after the denied Chart should run to its timeout:\n%s", out.String())
	}
	if _, err := testenv.CP.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "after-s1-ready", metav1.GetOptions{}); err == nil {
		t.Fatal("the ConfigMap after the gate was created")
	}
	stacktest.Destroy(t, s)
}
