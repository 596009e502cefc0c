package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optremove"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// autoGateRun is one `up` of the autoGate comparison.
type autoGateRun struct {
	label  string
	gates  int           // readiness resources in the stack after up
	upWall time.Duration // up began → the Automation API's Up returned (succeeded or failed)
	err    string        // the failure, for the run without gates
}

type autoGateResult struct {
	objects      int
	webhookAfter time.Duration
	runs         []autoGateRun
}

// The three ways the same stack is gated: nothing, a hand-placed gate, autoGate.
const (
	autoGateNone = "none"
	autoGateHand = "hand"
	autoGateAuto = "auto"
)

// autoGateComparison runs one stack three times, one after the other on the same cluster:
// External Secrets by a helm.sh/v3:Release (the rendered real chart, its CRDs with it, its
// webhooks sent to a test server on 127.0.0.1 that serves `webhookAfter` after the webhook
// Deployment is available, as the real pod does late), then n ExternalSecrets in one namespace
// that depend on the release. Without gates the ExternalSecrets fail on the webhook; with the
// hand-placed gate (HelmReleaseReady between them, as field report 001's fix) or readiness.AutoGate
// at the top (which batches the n objects' gates by key) the stack succeeds. Each run is
// destroyed before the next.
func (b *bench) autoGateComparison(ctx context.Context, env *stack.Env, n int) (autoGateResult, error) {
	res := autoGateResult{objects: n, webhookAfter: 5 * time.Second}
	client, err := kubernetes.NewForConfig(b.cp.Config)
	if err != nil {
		return res, err
	}
	crds, err := charts.ExternalSecretsCRDs(ctx)
	if err != nil {
		return res, err
	}
	if _, err := b.cp.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: bench-es}"); err != nil {
		return res, err
	}
	if err := b.dropCRDs(ctx, crds); err != nil {
		return res, err
	}
	for _, label := range []string{autoGateNone, autoGateHand, autoGateAuto} {
		run, err := b.autoGateRun(ctx, env, client, crds, n, res.webhookAfter, label)
		if err != nil {
			return res, fmt.Errorf("autoGate %s: %w", label, err)
		}
		res.runs = append(res.runs, run)
	}
	return res, nil
}

func (b *bench) autoGateRun(ctx context.Context, env *stack.Env, client kubernetes.Interface, crds []*unstructured.Unstructured, n int, after time.Duration, label string) (autoGateRun, error) {
	run := autoGateRun{label: label}
	wh, err := fakes.NewWebhook()
	if err != nil {
		return run, err
	}
	defer wh.Close()
	chart, err := charts.Local(b.dir+"/autogate-"+label, "external-secrets", wh, crds...)
	if err != nil {
		return run, err
	}
	program := func(ctx *pulumi.Context) error {
		if label == autoGateAuto {
			if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "5m"}); err != nil {
				return err
			}
		}
		release, err := stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
			"chart": pulumi.String(chart), "name": pulumi.String("external-secrets"),
			"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(300),
		})
		if err != nil {
			return err
		}
		deps := []pulumi.Resource{release}
		if label == autoGateHand {
			gate, err := readiness.NewHelmReleaseReady(ctx, "external-secrets-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("external-secrets"), Namespace: pulumi.String("external-secrets"),
				Timeout: pulumi.String("5m"), Triggers: pulumi.Array{release.Revision()},
			}, pulumi.DependsOn([]pulumi.Resource{release}))
			if err != nil {
				return err
			}
			deps = []pulumi.Resource{gate}
		}
		for i := 0; i < n; i++ {
			if _, err := stack.NewKube(ctx, fmt.Sprintf("es-%d", i), fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: es-%d, namespace: bench-es}
spec:
  refreshInterval: 1h
  secretStoreRef: {kind: ClusterSecretStore, name: vault}
  target: {name: es-%d}
  dataFrom: [{extract: {key: ghcr}}]`, i, i), pulumi.DependsOn(deps)); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := env.Stack(ctx, "benchautogate", label, string(b.cp.Kubeconfig), program)
	if err != nil {
		return run, err
	}
	defer func() {
		// The chart's webhook intercepts deletes too: destroy while it serves.
		_ = wh.Start()
		if _, err := s.Destroy(context.Background(), optdestroy.Remove()); err != nil {
			_ = s.Workspace().RemoveStack(context.Background(), label, optremove.Force())
		}
		wh.Stop()
	}()
	// The webhook serves late; in the run without gates not at all during up (Helm's own wait
	// can outlast a short delay, and the race would then be won by luck).
	var serving *fakes.Player
	if label != autoGateNone {
		serving = fakes.ServeWhenAvailable(client, wh, "external-secrets", "external-secrets-webhook", after, nil)
	}
	start := time.Now()
	_, upErr := s.Up(ctx)
	run.upWall = time.Since(start)
	if serving != nil {
		if err := serving.Stop(); err != nil {
			return run, err
		}
	}
	switch {
	case label == autoGateNone && upErr == nil:
		return run, fmt.Errorf("the stack without gates succeeded: the webhook was never met down")
	case label == autoGateNone:
		run.err = firstWebhookFailure(upErr.Error())
	case upErr != nil:
		return run, upErr
	}
	dep, err := s.Export(ctx)
	if err != nil {
		return run, err
	}
	var state struct {
		Resources []struct {
			Type string `json:"type"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(dep.Deployment, &state); err != nil {
		return run, err
	}
	for _, r := range state.Resources {
		if strings.HasPrefix(r.Type, "readiness:") {
			run.gates++
		}
	}
	return run, nil
}

// firstWebhookFailure is the part of an up error that names the webhook call that failed.
func firstWebhookFailure(msg string) string {
	i := strings.Index(msg, "failed calling webhook")
	if i < 0 {
		if len(msg) > 120 {
			msg = msg[:120] + "…"
		}
		return msg
	}
	msg = msg[i:]
	if j := strings.Index(msg, ":"); j > 0 {
		msg = msg[:j]
	}
	return msg
}

func (r report) autoGateMarkdown() string {
	a := r.autoGate
	if len(a.runs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## autoGate at %d gated objects\n\nOne stack (Automation API, the built CLI, the provider binary, the real pulumi-kubernetes plugin, "+
		"default `--parallel`): External Secrets by a `helm.sh/v3:Release` of the rendered real chart (CRDs with it; its webhooks sent "+
		"to a test server on 127.0.0.1 that starts serving %s after the webhook Deployment is available; not during the run without gates), then %d ExternalSecrets in "+
		"one namespace that depend on the release. Run three times in a row on the same cluster, each destroyed before the next: with no "+
		"gate, with the hand-placed gate (`HelmReleaseReady` between the release and the objects) and with `readiness.AutoGate` (Go SDK) "+
		"as the program's first line and no gate written.\n\n| stack | gates in the stack | `up` result | `up` wall time |\n| --- | --- | --- | --- |\n",
		a.objects, a.webhookAfter, a.objects)
	for _, run := range a.runs {
		result := "succeeded"
		if run.err != "" {
			result = "failed: `" + run.err + "`"
		}
		name := map[string]string{autoGateNone: "no gates", autoGateHand: "hand-placed gate", autoGateAuto: "`AutoGate`"}[run.label]
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", name, run.gates, result, run.upWall.Round(time.Millisecond))
	}
	if hand, auto, ok := a.handAndAuto(); ok {
		fmt.Fprintf(&b, "\n`AutoGate` / hand-placed: %.2f× the `up` wall time (goal: within 1.20×).\n", float64(auto)/float64(hand))
	}
	b.WriteString("\n")
	return b.String()
}

// handAndAuto are the `up` wall times of the hand-gated and the AutoGate runs.
func (a autoGateResult) handAndAuto() (hand, auto time.Duration, ok bool) {
	for _, run := range a.runs {
		switch run.label {
		case autoGateHand:
			hand = run.upWall
		case autoGateAuto:
			auto = run.upWall
		}
	}
	return hand, auto, hand > 0 && auto > 0
}

// dropCRDs deletes the chart's CRDs when an earlier section created them outside Helm: Helm
// refuses to install over objects it does not own ("invalid ownership metadata").
func (b *bench) dropCRDs(ctx context.Context, crds []*unstructured.Unstructured) error {
	for _, crd := range crds {
		ri, err := b.cp.ResourceFor(ctx, crd)
		if err != nil {
			return err
		}
		if err := ri.Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting CRD %s: %w", crd.GetName(), err)
		}
		// Setup, not a measured wait: poll until the CRD is gone (its instances are removed first).
		deadline := time.Now().Add(2 * time.Minute)
		for {
			_, err := ri.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s still there after 2m (last error: %v)", crd.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
