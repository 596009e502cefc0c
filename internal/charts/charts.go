// Package charts wraps the real charts rendered by the Helm CLI (provider/testdata/charts, see
// its README) into local Helm charts, a Chart.yaml and the rendered objects as templates/, that
// pulumi-kubernetes installs with helm.sh/v3:Release or helm.sh/v4:Chart exactly as a user's
// chart. What is changed, and why (everything else is the chart's own objects):
//   - objects with a helm.sh/hook annotation are left out: the hook Jobs' pods never run on
//     kwok's fake nodes (Helm would wait for them forever), and their RBAC goes with them;
//   - a LoadBalancer Service becomes ClusterIP: Helm's wait would wait for an address no local
//     cluster hands out (the values users set for kind clusters do the same);
//   - every webhook of every webhook configuration is sent to a test webhook server on
//     127.0.0.1 (clientConfig.url, same path, its CA): a service-backed webhook would make the
//     API server dial a ClusterIP, which the project's network rule forbids. That server plays
//     the chart's webhook pod: it starts serving when the test says, late, as the real one does.
package charts

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// Webhook is the server a chart's webhooks are sent to (fakes.Webhook is one).
type Webhook interface {
	URL() string      // https://127.0.0.1:<port>/validate
	CABundle() string // base64 PEM
}

// Rendered reads a rendered chart (ingress-nginx, external-secrets, cert-manager,
// apisix-ingress-controller) as objects.
func Rendered(name string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(filepath.Join(repo.Root(), "provider", "testdata", "charts", name+".yaml.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(raw), "\n---") {
		u, err := controlplane.Decode(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if u.GetKind() != "" { // not a comment-only document
			out = append(out, u)
		}
	}
	return out, nil
}

// Local writes the rendered chart name as a local chart under dir, with extra objects added
// (CRDs a chart installs with installCRDs) and the changes above; it returns the chart's path.
func Local(dir, name string, webhook Webhook, extra ...*unstructured.Unstructured) (string, error) {
	objs, err := Rendered(name)
	if err != nil {
		return "", err
	}
	return Write(dir, name, Prepare(append(extra, objs...), webhook))
}

// Prepare applies the changes above to objs and returns the objects to keep.
func Prepare(objs []*unstructured.Unstructured, webhook Webhook) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook {
			continue
		}
		u = u.DeepCopy()
		withoutLoadBalancer(u)
		if u.GetKind() == "ValidatingWebhookConfiguration" || u.GetKind() == "MutatingWebhookConfiguration" {
			SendWebhooksTo(u, webhook)
		}
		out = append(out, u)
	}
	return out
}

// withoutLoadBalancer makes a LoadBalancer Service a ClusterIP one: no load balancer fills its
// status here, and Helm's wait would never end.
func withoutLoadBalancer(u *unstructured.Unstructured) {
	if u.GetKind() != "Service" {
		return
	}
	if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t == "LoadBalancer" {
		_ = unstructured.SetNestedField(u.Object, "ClusterIP", "spec", "type")
		unstructured.RemoveNestedField(u.Object, "spec", "externalTrafficPolicy")
	}
}

// SendWebhooksTo points every webhook of a webhook configuration at the server (same path).
func SendWebhooksTo(cfg *unstructured.Unstructured, webhook Webhook) {
	base := strings.TrimSuffix(webhook.URL(), "/validate")
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	for _, h := range hooks {
		m, ok := h.(map[string]any)
		if !ok {
			continue
		}
		path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
		if path == "" {
			path = "/"
		}
		m["clientConfig"] = map[string]any{"url": base + path, "caBundle": webhook.CABundle()}
	}
	_ = unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks")
}

// Write writes objs as the templates of a local chart dir/name (version 0.1.0) and returns its
// path. Template actions in the objects' text are escaped: the rendered text is kept verbatim.
func Write(dir, name string, objs []*unstructured.Unstructured) (string, error) {
	chart := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		return "", err
	}
	meta := fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 0.1.0\ndescription: %s rendered by the Helm CLI, wrapped for local tests\n", name, name)
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte(meta), 0o644); err != nil {
		return "", err
	}
	var docs []string
	for _, u := range objs {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	text := strings.ReplaceAll(strings.Join(docs, "---\n"), "{{", "{{`{{`}}")
	return chart, os.WriteFile(filepath.Join(chart, "templates", "objects.yaml"), []byte(text), 0o644)
}

// ExternalSecretsCRDs are External Secrets' CRDs (group external-secrets.io) as
// `installCRDs: true` puts them in the release. The pinned module's (v0.12.1) CRDs serve v1beta1
// while the rendered chart's webhooks (2.9.0) intercept v1: each CRD also serves its v1beta1
// schema as v1 (the same fields; no conversion needed), as newer releases' CRDs do.
func ExternalSecretsCRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	crds, err := tools.ModuleCRDs(ctx, tools.ExternalSecretsModule, "deploy/crds")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, c := range crds {
		if g, _, _ := unstructured.NestedString(c.Object, "spec", "group"); g != "external-secrets.io" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
		var v1beta1 map[string]any
		for _, v := range versions {
			m, _ := v.(map[string]any)
			if m["name"] == "v1" {
				v1beta1 = nil
				break
			}
			if m["name"] == "v1beta1" {
				v1beta1 = m
			}
		}
		if v1beta1 != nil {
			v1 := (&unstructured.Unstructured{Object: v1beta1}).DeepCopy().Object
			v1["name"], v1["storage"], v1["served"] = "v1", false, true
			delete(v1, "deprecated")
			delete(v1, "deprecationWarning")
			_ = unstructured.SetNestedSlice(c.Object, append(versions, v1), "spec", "versions")
		}
		out = append(out, c)
	}
	return out, nil
}

// WithoutCRDs drops the CRDs from objs (a chart installed with crds.enabled=false, its CRDs by
// a step of their own).
func WithoutCRDs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			out = append(out, o)
		}
	}
	return out
}
