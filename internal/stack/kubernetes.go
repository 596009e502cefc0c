package stack

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
)

// pulumi-kubernetes resources by token, with the plugin version pinned. These are the tokens and
// inputs the SDKs send (the Go SDK's typed resources call the same RegisterResource): the main
// module registers them directly because compiling the Go SDK costs minutes of CI; the examples,
// a module of their own, use the SDK. Every resource gets the default kubernetes provider at
// k8splugin.Version, configured by the stack's `kubernetes:kubeconfig`.

func withPlugin(opts []pulumi.ResourceOption) []pulumi.ResourceOption {
	return append([]pulumi.ResourceOption{pulumi.Version(k8splugin.Version)}, opts...)
}

// Kube is a Kubernetes object created by pulumi-kubernetes (kubernetes:<group>/<version>:<Kind>).
type Kube struct {
	pulumi.CustomResourceState
	Metadata pulumi.MapOutput `pulumi:"metadata"`
}

// CreationTimestamp is the object's metadata.creationTimestamp as the API server set it (RFC 3339,
// whole seconds).
func (k *Kube) CreationTimestamp() pulumi.StringOutput {
	return k.Metadata.ApplyT(func(m map[string]any) string {
		s, _ := m["creationTimestamp"].(string)
		return s
	}).(pulumi.StringOutput)
}

// NewKube creates the object in manifest (YAML) with pulumi-kubernetes, as
// `new k8s.apps.v1.Deployment(...)` or `new k8s.apiextensions.CustomResource(...)` would.
func NewKube(ctx *pulumi.Context, name, manifest string, opts ...pulumi.ResourceOption) (*Kube, error) {
	u, err := controlplane.Decode(manifest)
	if err != nil {
		return nil, err
	}
	return NewKubeFrom(ctx, name, u.Object, opts...)
}

// NewKubeFrom is NewKube for an object given as a map (apiVersion and kind required).
func NewKubeFrom(ctx *pulumi.Context, name string, obj map[string]any, opts ...pulumi.ResourceOption) (*Kube, error) {
	token, err := KubeToken(obj)
	if err != nil {
		return nil, err
	}
	var k Kube
	err = ctx.RegisterResource(token, name, ToInput(obj).(pulumi.Map), &k, withPlugin(opts)...)
	return &k, err
}

// KubeToken is pulumi-kubernetes' type token for an object: kubernetes:core/v1:Namespace,
// kubernetes:apps/v1:Deployment, kubernetes:external-secrets.io/v1:ExternalSecret.
func KubeToken(obj map[string]any) (string, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return "", fmt.Errorf("an object needs apiVersion and kind")
	}
	if !strings.Contains(apiVersion, "/") {
		apiVersion = "core/" + apiVersion
	}
	return "kubernetes:" + apiVersion + ":" + kind, nil
}

// ToInput turns decoded YAML/JSON into Pulumi inputs.
func ToInput(v any) pulumi.Input {
	switch x := v.(type) {
	case map[string]any:
		m := pulumi.Map{}
		for k, e := range x {
			m[k] = ToInput(e)
		}
		return m
	case []any:
		a := pulumi.Array{}
		for _, e := range x {
			a = append(a, ToInput(e))
		}
		return a
	case string:
		return pulumi.String(x)
	case bool:
		return pulumi.Bool(x)
	case int64:
		return pulumi.Int(int(x))
	case int:
		return pulumi.Int(x)
	case float64:
		return pulumi.Float64(x)
	case pulumi.Input:
		return x
	case nil:
		return pulumi.Any(nil)
	}
	return pulumi.Any(v)
}

// HelmRelease is a kubernetes:helm.sh/v3:Release.
type HelmRelease struct {
	pulumi.CustomResourceState
	Name   pulumi.StringOutput `pulumi:"name"`
	Status pulumi.MapOutput    `pulumi:"status"`
}

// Revision is the release's revision (status.revision): a gate's trigger.
func (r *HelmRelease) Revision() pulumi.IntOutput {
	return r.Status.ApplyT(func(s map[string]any) int {
		switch v := s["revision"].(type) {
		case float64:
			return int(v)
		case int:
			return v
		}
		return 0
	}).(pulumi.IntOutput)
}

// NewHelmRelease installs a chart with helm.sh/v3:Release (args: chart, name, namespace,
// createNamespace, values, skipAwait, timeout, ...).
func NewHelmRelease(ctx *pulumi.Context, name string, args pulumi.Map, opts ...pulumi.ResourceOption) (*HelmRelease, error) {
	var r HelmRelease
	err := ctx.RegisterResource("kubernetes:helm.sh/v3:Release", name, args, &r, withPlugin(opts)...)
	return &r, err
}

// Chart is a kubernetes:helm.sh/v4:Chart (a component: its objects are its children).
type Chart struct {
	pulumi.ResourceState
	Resources pulumi.ArrayOutput `pulumi:"resources"`
}

// NewChart renders and applies a chart with helm.sh/v4:Chart (args: chart, namespace, values, ...).
func NewChart(ctx *pulumi.Context, name string, args pulumi.Map, opts ...pulumi.ResourceOption) (*Chart, error) {
	var c Chart
	err := ctx.RegisterRemoteComponentResource("kubernetes:helm.sh/v4:Chart", name, args, &c, withPlugin(opts)...)
	return &c, err
}

// NewConfigGroup applies YAML with yaml/v2:ConfigGroup (args: yaml, objs, files).
func NewConfigGroup(ctx *pulumi.Context, name string, args pulumi.Map, opts ...pulumi.ResourceOption) (*Chart, error) {
	var c Chart
	err := ctx.RegisterRemoteComponentResource("kubernetes:yaml/v2:ConfigGroup", name, args, &c, withPlugin(opts)...)
	return &c, err
}

// NewConfigFile applies a YAML file with yaml/v2:ConfigFile (args: file).
func NewConfigFile(ctx *pulumi.Context, name string, args pulumi.Map, opts ...pulumi.ResourceOption) (*Chart, error) {
	var c Chart
	err := ctx.RegisterRemoteComponentResource("kubernetes:yaml/v2:ConfigFile", name, args, &c, withPlugin(opts)...)
	return &c, err
}
