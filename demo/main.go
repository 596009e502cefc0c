// Command demo is `make demo`: it starts a local Kubernetes control plane, runs a Pulumi stack
// whose custom resource waits on CrdReady while the CRD arrives late, prints a timeline a person
// can read, destroys the stack and stops the control plane.
package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// timeline prints lines stamped with the time since the demo's stack started.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	seen  map[string]bool
}

func (tl *timeline) say(format string, a ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	if tl.seen[msg] {
		return
	}
	tl.seen[msg] = true
	fmt.Printf("  t+%6.2fs  %s\n", time.Since(tl.start).Seconds(), msg)
}

func run() error {
	ctx := context.Background()
	fmt.Println("== pulumi-readiness demo ==")
	fmt.Println("Building tools if needed and starting a local control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)...")
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer cp.Stop()
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
	fmt.Println("Note: Kubernetes objects inside the stack are created by a small stand-in provider (kubetest),")
	fmt.Println("      because the pulumi-kubernetes plugin cannot be installed offline; users use pulumi-kubernetes.")

	const group = "demo.readiness.io"
	const esoGroup = "eso.demo.readiness.io"
	// What a Helm install would have put there before the stack's own resources: cert-manager's
	// CRDs, the External Secrets-like CRD, its namespaces and its webhook configuration. The
	// webhook server itself starts late, like a webhook pod after the chart returned.
	if err := installCertManagerCRDs(ctx, cp); err != nil {
		return err
	}
	webhook, err := fakes.NewWebhook()
	if err != nil {
		return err
	}
	defer webhook.Close()
	if _, err := cp.Apply(ctx, crdDoc(esoGroup, "Widget", "widgets")+"\n---\n"+webhook.Configuration("externalsecret-validate", esoGroup)+
		"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: hello-world}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: nodejs-demo}"+
		"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ai-ops}"); err != nil {
		return err
	}

	program := func(ctx *pulumi.Context) error {
		// Story 1 (field report 002): a custom resource waits for its CRD.
		gate, err := readiness.NewCrdReady(ctx, "widgets-crd", &readiness.CrdReadyArgs{
			Names:   pulumi.StringArray{pulumi.String("widgets." + group)},
			Timeout: pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		if _, err = stack.NewKubeObject(ctx, "my-widget",
			"apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: my-widget, namespace: default}\nspec: {size: 3}",
			pulumi.DependsOn([]pulumi.Resource{gate})); err != nil {
			return err
		}
		ctx.Export("kinds", gate.Kinds)

		// Story 2 (field report 000): the Deployment mounts the TLS Secret only once it is issued.
		cert, err := stack.NewKubeObject(ctx, "ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.ai-ops.svc], issuerRef: {name: ca-issuer, kind: ClusterIssuer}}`)
		if err != nil {
			return err
		}
		tls, err := readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
			Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("ai-ops"), Timeout: pulumi.String("2m"),
		}, pulumi.DependsOn([]pulumi.Resource{cert}))
		if err != nil {
			return err
		}
		if _, err = stack.NewKubeObject(ctx, "ai-ops-agent", `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: registry.local/ai-ops-agent:1}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, pulumi.DependsOn([]pulumi.Resource{tls})); err != nil {
			return err
		}
		ctx.Export("tlsSecret", tls.SecretName)

		// Story 3 (field report 001): ExternalSecrets wait for the webhook that validates them.
		hook, err := readiness.NewWebhookReady(ctx, "external-secrets-webhook", &readiness.WebhookReadyArgs{
			ValidatingWebhookConfiguration: pulumi.String("externalsecret-validate"),
			Probe: pulumi.Map{"apiVersion": pulumi.String(esoGroup + "/v1"), "kind": pulumi.String("Widget"),
				"metadata": pulumi.Map{"name": pulumi.String("readiness-probe"), "namespace": pulumi.String("default")}},
			Timeout: pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		for _, ns := range []string{"default", "hello-world", "nodejs-demo"} {
			if _, err := stack.NewKubeObject(ctx, "ghcr-pull-secret-"+ns, "apiVersion: "+esoGroup+"/v1\nkind: Widget\nmetadata: {name: ghcr-pull-secret, namespace: "+ns+"}",
				pulumi.DependsOn([]pulumi.Resource{hook})); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := env.Stack(ctx, "readiness-demo", "dev", string(cp.Kubeconfig), program)
	if err != nil {
		return err
	}

	fmt.Println("\nThree stories from the field reports, in one `pulumi up`:")
	fmt.Println("  1. (002) a custom resource applied while its CRD is still installing: `no matches for kind \"Widget\"`.")
	fmt.Println("  2. (000) a Deployment mounting a cert-manager TLS Secret before it is issued: `secret \"ai-ops-agent-tls\" not found`.")
	fmt.Println("  3. (001) ExternalSecrets created before the webhook serves: `failed calling webhook ... connection refused`.")
	fmt.Println("With gates in front, the stack just waits for each, in parallel, and nothing fails.")
	fmt.Println("\nTimeline (the demo installs the CRD at +5 s, issues the certificate at +4 s, starts the webhook at +6 s):")
	tl := &timeline{start: time.Now(), seen: map[string]bool{}}
	go func() {
		time.Sleep(5 * time.Second)
		if _, err := cp.Apply(ctx, crdDoc(group, "Widget", "widgets")); err != nil {
			tl.say("demo: installing the CRD failed: %v", err)
			return
		}
		tl.say("demo: CRD widgets.%s installed (as a slow Helm release would)", group)
	}()
	go func() {
		time.Sleep(4 * time.Second)
		if err := issueCertificate(ctx, cp); err != nil {
			tl.say("demo: issuing the certificate failed: %v", err)
			return
		}
		tl.say("demo: cert-manager (played by the demo) issued ai-ops/ai-ops-agent-tls")
	}()
	go func() {
		time.Sleep(6 * time.Second)
		if err := webhook.Start(); err != nil {
			tl.say("demo: starting the webhook failed: %v", err)
			return
		}
		tl.say("demo: the admission webhook started serving on %s", webhook.URL())
	}()
	evs := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range evs {
			describe(tl, e)
		}
	}()
	res, err := s.Up(ctx, optup.EventStreams(evs))
	<-done
	if err != nil {
		return fmt.Errorf("pulumi up: %w", err)
	}
	tl.say("pulumi up finished: kinds=%v tlsSecret=%v", res.Outputs["kinds"].Value, res.Outputs["tlsSecret"].Value)

	fmt.Println("\nDestroying the stack (gates delete nothing in the cluster)...")
	if _, err := s.Destroy(ctx, optdestroy.Remove()); err != nil {
		return fmt.Errorf("pulumi destroy: %w", err)
	}
	fmt.Println("Stopping the control plane. Demo succeeded.")
	return nil
}

func describe(tl *timeline, e events.EngineEvent) {
	short := func(urn string) string {
		parts := strings.Split(urn, "::")
		if len(parts) < 2 {
			return urn
		}
		return parts[len(parts)-2] + " " + parts[len(parts)-1]
	}
	switch {
	case e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type != "pulumi:pulumi:Stack" &&
		!strings.HasPrefix(e.ResourcePreEvent.Metadata.Type, "pulumi:providers:"):
		tl.say("%s: %s started", short(e.ResourcePreEvent.Metadata.URN), e.ResourcePreEvent.Metadata.Op)
	case e.ResOutputsEvent != nil && e.ResOutputsEvent.Metadata.Type != "pulumi:pulumi:Stack" &&
		!strings.HasPrefix(e.ResOutputsEvent.Metadata.Type, "pulumi:providers:"):
		tl.say("%s: %s done", short(e.ResOutputsEvent.Metadata.URN), e.ResOutputsEvent.Metadata.Op)
	case e.DiagnosticEvent != nil && e.DiagnosticEvent.URN != "" && strings.TrimSpace(e.DiagnosticEvent.Message) != "":
		tl.say("%s: %s", short(e.DiagnosticEvent.URN), strings.TrimSpace(e.DiagnosticEvent.Message))
	case e.ResOpFailedEvent != nil:
		tl.say("%s: FAILED", short(e.ResOpFailedEvent.Metadata.URN))
	}
}

func crdDoc(group, kind, plural string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ` + plural + "." + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {kind: ` + kind + `, plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `, listKind: ` + kind + `List}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
}

func installCertManagerCRDs(ctx context.Context, cp *controlplane.ControlPlane) error {
	crds, err := controlplane.ModuleCRDs(ctx, controlplane.CertManagerModule, "deploy/crds")
	if err != nil {
		return err
	}
	for _, c := range crds {
		ri, err := cp.ResourceFor(ctx, c)
		if err != nil {
			return err
		}
		if _, err := ri.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// issueCertificate plays cert-manager: once the stack created the Certificate, it writes the
// TLS Secret and marks the Certificate Ready for its generation.
func issueCertificate(ctx context.Context, cp *controlplane.ControlPlane) error {
	certObj, _ := controlplane.Decode("apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: ai-ops-agent, namespace: ai-ops}")
	ri, err := cp.ResourceFor(ctx, certObj)
	if err != nil {
		return err
	}
	var cur *unstructured.Unstructured
	for i := 0; i < 600; i++ { // the demo waits for the stack to create it
		if cur, err = ri.Get(ctx, "ai-ops-agent", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	c, err := fakes.IssueCertificate("ai-ops-agent.ai-ops.svc", 90*24*time.Hour)
	if err != nil {
		return err
	}
	sec, _ := controlplane.Decode("apiVersion: v1\nkind: Secret\nmetadata: {name: ai-ops-agent-tls, namespace: ai-ops}\ntype: kubernetes.io/tls")
	sec.Object["data"] = map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM),
		"tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM), "ca.crt": base64.StdEncoding.EncodeToString(c.CAPEM)}
	sri, err := cp.ResourceFor(ctx, sec)
	if err != nil {
		return err
	}
	if _, err := sri.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return err
	}
	cur.Object["status"] = map[string]any{"revision": int64(1), "notAfter": c.NotAfter.UTC().Format(time.RFC3339),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
			"message": "Certificate is up to date and has not expired", "observedGeneration": cur.GetGeneration(),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	_, err = ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
