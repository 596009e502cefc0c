package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func installModuleCRDs(t *testing.T, module string) {
	crds, err := tools.ModuleCRDs(context.Background(), module, "deploy/crds")
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, c := range crds {
		if _, err := testenv.Dynamic(t).Resource(gvr).Create(context.Background(), c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// TestPresetsCertManagerAndExternalSecrets installs cert-manager's and External Secrets' real
// CRDs, plays their webhooks with TLS servers on 127.0.0.1 that start late, and runs one stack
// with the two presets: up returns only once both installs are usable.
func TestPresetsCertManagerAndExternalSecrets(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	installModuleCRDs(t, tools.CertManagerModule)
	installModuleCRDs(t, tools.ExternalSecretsModule)
	for _, ns := range []string{"cert-manager", "external-secrets"} {
		if _, err := testenv.CP.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}"); err != nil && !apierrors.IsAlreadyExists(err) &&
			!strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	cm, eso := testenv.NewWebhook(t), testenv.NewWebhook(t)
	testenv.Apply(t, strings.Join([]string{
		cm.ConfigurationFor("ValidatingWebhookConfiguration", "cert-manager-webhook", "cert-manager.io", "issuers", "certificates"),
		cm.ConfigurationFor("MutatingWebhookConfiguration", "cert-manager-webhook", "cert-manager.io", "issuers", "certificates"),
		eso.ConfigurationFor("ValidatingWebhookConfiguration", "externalsecret-validate", "external-secrets.io", "externalsecrets"),
		eso.ConfigurationFor("ValidatingWebhookConfiguration", "secretstore-validate", "external-secrets.io", "secretstores"),
		deploymentDoc("external-secrets", "external-secrets"),
	}, "\n---\n"))
	t.Cleanup(func() {
		for _, c := range []struct{ res, name string }{{"validatingwebhookconfigurations", "cert-manager-webhook"},
			{"mutatingwebhookconfigurations", "cert-manager-webhook"}, {"validatingwebhookconfigurations", "externalsecret-validate"},
			{"validatingwebhookconfigurations", "secretstore-validate"}} {
			_ = testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: c.res}).
				Delete(context.Background(), c.name, metav1.DeleteOptions{})
		}
	})

	twoMinutes, oneSecond := "2m", "1s"
	program := func(ctx *pulumi.Context) error {
		c, err := readiness.NewCertManagerReady(ctx, "cert-manager", &readiness.CertManagerReadyArgs{Timeout: &twoMinutes})
		if err != nil {
			return err
		}
		e, err := readiness.NewExternalSecretsReady(ctx, "external-secrets", &readiness.ExternalSecretsReadyArgs{Timeout: &twoMinutes, StableFor: &oneSecond})
		if err != nil {
			return err
		}
		ctx.Export("certManagerVersions", c.ServedVersions)
		ctx.Export("externalSecretsVersions", e.ServedVersions)
		ctx.Export("externalSecretsWebhooks", e.WebhookConfigurations)
		return nil
	}
	s := stacktest.NewStack(t, env, "presets", program)
	var started time.Time
	go func() {
		time.Sleep(4 * time.Second) // the webhook pods start serving late
		started = time.Now()
		cm.Start(t)
		eso.Start(t)
	}()
	res, out := stacktest.Up(t, s)
	if started.IsZero() {
		t.Fatal("up returned before the webhooks served")
	}
	if v := fmt.Sprint(res.Outputs["certManagerVersions"].Value); !strings.Contains(v, "cert-manager.io/v1") {
		t.Errorf("certManagerVersions = %s", v)
	}
	if v := fmt.Sprint(res.Outputs["externalSecretsVersions"].Value); !strings.Contains(v, "external-secrets.io/v1beta1") {
		t.Errorf("externalSecretsVersions = %s", v)
	}
	// The preset's stableFor reached each of its steps.
	dep, err := s.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := strings.Count(strings.ReplaceAll(string(dep.Deployment), " ", ""), `"stableFor":"1s"`)
	if steps < 2*4 { // each of the four steps: in its inputs and its outputs
		t.Errorf("ExternalSecretsReady's stableFor reached %d input/output maps of its steps, want 8", steps)
	}
	for _, row := range []string{"readiness:index:CrdReady", "readiness:index:WebhookReady", "readiness:index:RolloutReady", "cert-manager-validating-webhook"} {
		if !strings.Contains(out, row) {
			t.Errorf("up does not show the step %q as its own row:\n%s", row, out)
		}
	}
}

func deploymentDoc(ns, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: controller, image: registry.local/%[2]s:1}]`, ns, name)
}
