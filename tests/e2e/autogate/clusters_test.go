package autogate

// Issue 32: every registration is gated against the cluster its kubernetes provider talks to.
// A second control plane ("staging") is reached through an explicit kubernetes provider, as a
// stack that creates its own cluster does: its CRD's custom resource waits on a CrdReady of a
// readiness provider configured as that kubernetes provider is (the stack's own cluster does not
// serve the kind: a CrdReady there would wait its whole timeout); the stack cluster's webhook
// gates the stack cluster's ConfigMap and never the other cluster's.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

type kubeProvider struct {
	pulumi.ProviderResourceState
}

func TestAutoGateGatesEachClusterWithItsOwnProvider(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	staging, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer staging.Stop()

	label := fmt.Sprintf("cl%d", time.Now().UnixNano()%1_000_000)
	group := label + ".readiness.test"
	hook := testenv.NewWebhook(t)
	hook.Start(t)
	hookDoc := strings.Replace(hook.ConfigurationFor("ValidatingWebhookConfiguration", "cm-"+label, "", "configmaps"), "  rules:",
		"  objectSelector: {matchLabels: {corpus: "+label+"}}\n  rules:", 1)
	hookDoc = strings.Replace(hookDoc, "- name: validating.cm-"+label+".\n", "- name: validating.cm-"+label+".configmaps.test\n", 1)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: default, labels: {corpus: " + label + "}}\ndata: {a: b}"

	s := stacktest.NewStack(t, env, "autogateclusters", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "45s"}); err != nil {
			return err
		}
		var other kubeProvider
		if err := ctx.RegisterResource("pulumi:providers:kubernetes", "staging",
			pulumi.Map{"kubeconfig": pulumi.ToSecret(pulumi.String(string(staging.Kubeconfig)))}, &other, pulumi.Version(k8splugin.Version)); err != nil {
			return err
		}
		on := pulumi.Provider(&other)
		crd, err := stack.NewKube(ctx, "widgets-crd", testenv.CRD(group, "Widget", "widgets"), on)
		if err != nil {
			return err
		}
		if _, err := stack.NewKube(ctx, "widget", "apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}",
			on, pulumi.DependsOn([]pulumi.Resource{crd})); err != nil {
			return err
		}
		h, err := stack.NewKube(ctx, "cm-hook", hookDoc)
		if err != nil {
			return err
		}
		if _, err := stack.NewKube(ctx, "here", cm, pulumi.DependsOn([]pulumi.Resource{h})); err != nil {
			return err
		}
		// Near miss: the same labels on the other cluster, after the stack cluster's webhook.
		_, err = stack.NewKube(ctx, "there", cm, on, pulumi.DependsOn([]pulumi.Resource{h}))
		return err
	})
	began := time.Now()
	res, out := stacktest.Up(t, s)
	defer stacktest.Destroy(t, s)
	t.Logf("up took %s", time.Since(began).Round(time.Millisecond))

	// The Widget is on the other cluster, and the stack's cluster does not serve its kind.
	w, err := dynamic.NewForConfig(staging.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace("default").Get(ctx, "w1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Widget on the other cluster: %v", err)
	}
	gates := stacktest.GatesOf(t, s)
	t.Logf("gates: %s", strings.Join(gates, ", "))
	if want := "CrdReady auto-crd-widgets." + group + "-staging"; !slices.Contains(gates, want) {
		t.Errorf("gates %v lack %s", gates, want)
	}
	var admissions []string
	for _, g := range gates {
		if strings.HasPrefix(g, "AdmissionReady auto-admission-configmaps") {
			admissions = append(admissions, g)
		}
	}
	if len(admissions) != 1 || strings.HasSuffix(admissions[0], "-staging") {
		t.Errorf("configmap gates %v: want the stack cluster's one only (never one for the other cluster's ConfigMap)", admissions)
	}
	// The CrdReady ran through a readiness provider configured as the kubernetes provider.
	ranThrough(t, s, out, "auto-crd-", "autogate-staging")
	_ = res
}

// ranThrough checks that every gate whose name starts with prefix ran through the readiness
// provider named provider, which autoGate made (and said so in the engine's output out).
func ranThrough(t *testing.T, s auto.Stack, out, prefix, provider string) {
	t.Helper()
	for name, r := range stateOf(t, s) {
		if strings.HasPrefix(name, prefix) {
			if p, _ := r["provider"].(string); !strings.Contains(p, "::"+provider+"::") {
				t.Errorf("%s ran through provider %q, want %s", name, p, provider)
			}
		}
	}
	if !strings.Contains(out, "gated by readiness provider "+provider) {
		t.Errorf("no log line naming the readiness provider %s autoGate made:\n%s", provider, out)
	}
}
