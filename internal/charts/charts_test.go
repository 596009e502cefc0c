package charts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

type fixedWebhook struct{}

func (fixedWebhook) URL() string      { return "https://127.0.0.1:4443/validate" }
func (fixedWebhook) CABundle() string { return "Q0E=" }

func TestLocalIngressNginx(t *testing.T) {
	path, err := Local(t.TempDir(), "ingress-nginx", fixedWebhook{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(path, "templates", "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"url: https://127.0.0.1:4443/networking/v1/ingresses", "caBundle: Q0E=", "kind: Deployment", "kind: IngressClass"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	for _, gone := range []string{"kind: Job", "helm.sh/hook", "type: LoadBalancer", "service:\n        name: ingress-nginx-controller-admission"} {
		if strings.Contains(text, gone) {
			t.Errorf("chart still holds %q", gone)
		}
	}
}

func TestWriteEscapesTemplateActions(t *testing.T) {
	objs, err := Rendered("ingress-nginx")
	if err != nil {
		t.Fatal(err)
	}
	objs[0].SetAnnotations(map[string]string{"note": "{{ .Values.x }}"})
	path, err := Write(t.TempDir(), "x", objs[:1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(path, "templates", "objects.yaml"))
	if !strings.Contains(string(b), "{{`{{`}} .Values.x }}") {
		t.Errorf("template action not escaped:\n%s", b)
	}
}

// The injector example's charts: the two chart folders a mirror holds, the injector's webhook
// Ignore and sent to the server by URL (no Service for the API server to dial).
func TestLinkerdShaped(t *testing.T) {
	root, err := LinkerdShaped(t.TempDir(), fixedWebhook{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "linkerd-crds", "Chart.yaml")); err != nil {
		t.Error(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "linkerd-control-plane", "templates", "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"name: linkerd-proxy-injector-webhook-config", "failurePolicy: Ignore",
		"url: https://127.0.0.1:4443/", "caBundle: Q0E=", "kind: Deployment", "kind: Service"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(text, "service:\n") {
		t.Errorf("the webhook still names a Service:\n%s", text)
	}
}

// The apisix example's chart: the rendered ingress controller moved into the umbrella's release
// namespace, its webhooks Fail and sent to the server by URL, beside the shaped gateway.
func TestAPISIXShaped(t *testing.T) {
	path, err := APISIXShaped(t.TempDir(), fixedWebhook{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(path, "templates", "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"name: apisix-ingress-controller-webhook\n", "name: gatewayproxies.apisix.apache.org",
		"url: https://127.0.0.1:4443/validate-apisix-apache-org-v1alpha1-gatewayproxy", "caBundle: Q0E=",
		"name: apisix-ingress-controller\n  namespace: apisix\n", "image: apache/apisix:3.16.0-ubuntu", "name: apisix-admin"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if n := strings.Count(text, "failurePolicy: Fail"); n != 12 {
		t.Errorf("%d webhooks Fail, want all 12", n)
	}
	for _, gone := range []string{"failurePolicy: Ignore", "apisix-ingress-system", "service:\n      name: apisix-ingress-controller-webhook-svc"} {
		if strings.Contains(text, gone) {
			t.Errorf("chart still holds %q", gone)
		}
	}
}

// The stand-in chart keeps what the real node runs (hooks, the Service-backed webhook) and
// changes only what an air-gapped cluster without a load balancer changes.
func TestStandinIngressNginx(t *testing.T) {
	path, err := IngressNginxChart.Write(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(path, "templates", "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, img := range IngressNginxChart.Images {
		if !strings.Contains(text, "image: "+img.Ref+"\n") {
			t.Errorf("chart does not run %s by tag", img.Ref)
		}
	}
	for _, want := range []string{"kind: Job", "helm.sh/hook: pre-install,pre-upgrade", "name: ingress-nginx-controller-admission\n", "path: /networking/v1/ingresses"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	for _, gone := range []string{"@sha256:", "type: LoadBalancer", "url: "} {
		if strings.Contains(text, gone) {
			t.Errorf("chart still holds %q", gone)
		}
	}
}

// The controllers' trims apply to their pinned modules and leave the cloud SDKs out; the
// images' builds compile them (tests/e2e/realnode).
func TestControllerTrims(t *testing.T) {
	for _, c := range []struct {
		img   tools.GoImage
		cloud []string
	}{
		{CertManagerChart.Images[0], []string{"github.com/aws/", "github.com/Azure/azure-sdk-for-go", "github.com/Azure/go-autorest", "cloud.google.com/", "google.golang.org/api/", "github.com/digitalocean/", "github.com/cloudflare/"}},
		{ExternalSecretsChart.Images[0], []string{"github.com/aws/", "github.com/Azure/azure-sdk-for-go", "github.com/Azure/go-autorest", "cloud.google.com/", "google.golang.org/api/"}},
	} {
		deps, err := tools.TrimmedDeps(t.Context(), c.img.ModDir, c.img.Trim, c.img.Pkg)
		if err != nil {
			t.Fatalf("%s: %v", c.img.Ref, err)
		}
		for _, d := range deps {
			for _, cloud := range c.cloud {
				if strings.HasPrefix(d, cloud) {
					t.Errorf("%s still links %s", c.img.Ref, d)
				}
			}
		}
		if len(deps) < 300 {
			t.Errorf("%s links %d packages: not the controller", c.img.Ref, len(deps))
		}
	}
}

// cmctl is built with the commands the chart runs (startupapicheck's `check api`): Helm and the
// other clients its experimental install links are left out, and `check` is still in.
func TestCmctlTrim(t *testing.T) {
	img := CertManagerChart.Images[3]
	deps, err := tools.TrimmedDeps(t.Context(), img.ModDir, img.Trim, img.Pkg)
	if err != nil {
		t.Fatal(err)
	}
	has := func(prefix string) bool {
		for _, d := range deps {
			if strings.HasPrefix(d, prefix) {
				return true
			}
		}
		return false
	}
	for _, gone := range []string{"helm.sh/helm/", "oras.land/", "github.com/containerd/containerd", "github.com/docker/docker", "github.com/cert-manager/cert-manager/cmd/ctl/pkg/install"} {
		if has(gone) {
			t.Errorf("%s still links %s", img.Ref, gone)
		}
	}
	for _, kept := range []string{"github.com/cert-manager/cert-manager/cmd/ctl/pkg/check/api", "github.com/cert-manager/cert-manager/pkg/util/cmapichecker"} {
		if !has(kept) {
			t.Errorf("%s does not link %s: the chart's startupapicheck runs it", img.Ref, kept)
		}
	}
}

// The images built from one tools module share its trimmed copy, or none: a replaced module's
// packages are other packages to the build cache, so mixing the two compiles the shared ones twice.
func TestImagesOfAModuleShareOneTrim(t *testing.T) {
	for _, c := range []ModuleChart{CertManagerChart, ExternalSecretsChart} {
		trims := map[string]*tools.ModuleTrim{}
		for _, img := range c.Images {
			if first, ok := trims[img.ModDir]; ok && first != img.Trim {
				t.Errorf("%s: built with another trim than the chart's other images from %s", img.Ref, img.ModDir)
			}
			trims[img.ModDir] = img.Trim
		}
	}
}
