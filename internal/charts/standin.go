package charts

import (
	"context"
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// StandinChart is a rendered chart (Rendered) whose images cannot be built from Go modules
// (ingress-nginx's controller needs nginx): its webhook is served by a real pod from a
// stand-in image made here under the chart's image names. The chart runs as rendered, hooks
// included, with two changes an air-gapped cluster without a load balancer makes too: images
// referenced by tag alone (a mirror cannot serve upstream's digests; the chart's
// image.digest values set empty) and LoadBalancer Services as ClusterIP (else Helm's wait
// never ends).
type StandinChart struct {
	Name   string
	Images []tools.GoImage
}

// IngressNginxChart is ingress-nginx's chart 4.15.1 (the rendered fixture), its controller and
// kube-webhook-certgen images both the stand-in (internal/charts/cmd/ingress-nginx-standin).
var IngressNginxChart = StandinChart{Name: "ingress-nginx", Images: []tools.GoImage{
	{Ref: "registry.k8s.io/ingress-nginx/controller:v1.15.1", ModDir: repo.Root(), Pkg: "./internal/charts/cmd/ingress-nginx-standin"},
	{Ref: "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.6.9", ModDir: repo.Root(), Pkg: "./internal/charts/cmd/ingress-nginx-standin"},
}}

// ImagesToBuild are the stand-in images.
func (c StandinChart) ImagesToBuild() []tools.GoImage { return c.Images }

var imageDigest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// Write writes the chart under dir and returns its folder.
func (c StandinChart) Write(_ context.Context, dir string) (string, error) {
	objs, err := Rendered(c.Name)
	if err != nil {
		return "", err
	}
	for _, u := range objs {
		withoutLoadBalancer(u)
		podSpec, found, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		if !found {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(podSpec, field)
			for _, ct := range cs {
				if m, ok := ct.(map[string]any); ok {
					if img, ok := m["image"].(string); ok {
						m["image"] = imageDigest.ReplaceAllString(img, "")
					}
				}
			}
			if cs != nil {
				_ = unstructured.SetNestedSlice(podSpec, cs, field)
			}
		}
		_ = unstructured.SetNestedMap(u.Object, podSpec, "spec", "template", "spec")
	}
	return Write(dir, c.Name, objs)
}
