// Package corpus runs autoGate's corpus (tests/corpus/autogate.json, issue 47) as Go programs:
// each shape becomes a program written with pulumi-kubernetes' Go SDK (CustomResource for every
// object: the Go SDK registers a typed resource under the same token with the same props;
// Outputs for references, a ComponentResource, an explicit Provider, a yaml v1 ConfigGroup),
// previewed on the real plugin and a real API server. The gates AutoGate registers must be
// exactly the shape's: the TypeScript and Python drivers check the same.
package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	helmv4 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v4"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/yaml"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

type item struct {
	Name               string            `json:"name"`
	Object             map[string]any    `json:"object"`
	KubernetesProvider map[string]string `json:"kubernetesProvider"`
	Component          string            `json:"component"`
	ConfigGroupV1      []any             `json:"configGroupV1"`
	ChartV4            map[string]string `json:"chartV4"`
	Release            map[string]string `json:"release"`
	ResourceReady      map[string]any    `json:"resourceReady"`
	DependsOn          []string          `json:"dependsOn"`
	Provider           string            `json:"provider"`
	Parent             string            `json:"parent"`
}

type shape struct {
	Name    string            `json:"name"`
	Why     string            `json:"why"`
	Config  map[string]string `json:"config"`
	Cluster []any             `json:"cluster"`
	// OtherCluster: objects created in a second cluster ("$other-cluster" is its kubeconfig).
	OtherCluster []any    `json:"otherCluster"`
	Program      []item   `json:"program"`
	Gates        []string `json:"gates"`
	Warnings     []string `json:"warnings"`
	// PreviewError: the preview must fail, saying it.
	PreviewError string `json:"previewError"`
}

type corpus struct {
	Setup  []any   `json:"setup"`
	Shapes []shape `json:"shapes"`
}

func TestCorpus(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "corpus", "autogate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c corpus
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	up := testenv.NewWebhook(t)
	up.Start(t)
	down := testenv.NewWebhook(t) // never serves: its port refuses connections
	charts := map[string]string{}
	x := expander{up: up, down: down, chart: func(name string) string {
		if path, ok := charts[name]; ok {
			return path
		}
		path, err := localChart(t.TempDir(), name, down)
		if err != nil {
			t.Fatal(err)
		}
		charts[name] = path
		return path
	}}
	for _, o := range c.Setup {
		apply(t, testenv.CP, x.expand(o, nil).(map[string]any))
	}
	for _, sh := range c.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			for _, o := range sh.Cluster {
				obj := apply(t, testenv.CP, x.expand(o, nil).(map[string]any))
				t.Cleanup(func() { remove(testenv.CP, obj) })
			}
			if len(sh.OtherCluster) > 0 && x.other == nil {
				other, err := controlplane.Start(context.Background(), controlplane.Options{})
				if err != nil {
					t.Fatal(err)
				}
				x.other = other
				defer func() { other.Stop(); x.other = nil }()
			}
			for _, o := range sh.OtherCluster {
				obj := apply(t, x.other, x.expand(o, nil).(map[string]any))
				t.Cleanup(func() {
					if x.other != nil {
						remove(x.other, obj)
					}
				})
			}
			s := run.Stack(t, "corpus-go", sh.Config, program(sh, x))
			var out strings.Builder
			ch := make(chan events.EngineEvent)
			gates := map[string]bool{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for e := range ch {
					if e.ResourcePreEvent != nil && strings.HasPrefix(e.ResourcePreEvent.Metadata.Type, "readiness:index:") {
						m := e.ResourcePreEvent.Metadata
						gates[m.Type[strings.LastIndex(m.Type, ":")+1:]+" "+resource.URN(m.URN).Name()] = true
					}
				}
			}()
			_, err := s.Preview(context.Background(), optpreview.ProgressStreams(&out), optpreview.EventStreams(ch))
			<-done
			switch {
			case sh.PreviewError != "" && (err == nil || !strings.Contains(out.String(), sh.PreviewError)):
				t.Errorf("the preview did not fail with %s: %v\n%s", sh.PreviewError, err, out.String())
			case sh.PreviewError == "" && err != nil:
				t.Fatalf("preview: %v\n%s", err, out.String())
			}
			got := slices.Sorted(func(yield func(string) bool) {
				for g := range gates {
					if !yield(g) {
						return
					}
				}
			})
			want := slices.Sorted(slices.Values(sh.Gates))
			if !slices.Equal(got, want) {
				t.Errorf("%s\ngates %q, want %q\n%s", sh.Why, got, want, out.String())
			}
			for _, w := range sh.Warnings {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no warning %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// expander replaces the corpus' placeholders: {"$crd": [group, kind, plural]}, "$webhook-up" and
// "$webhook-down" (a clientConfig), {"$ref": name, "path": "a.b"} (an Output of the program's
// resource name).
type expander struct {
	up, down *testenv.Webhook
	other    *controlplane.ControlPlane // the second cluster, while a shape needs it
	chart    func(name string) string   // "$chart:NAME": a local chart of fixture NAME, its webhooks down's
}

// localChart is what tests/nodejs and tests/python's localChart write (internal/charts/cmd/localchart).
func localChart(dir, name string, webhook *testenv.Webhook) (string, error) {
	var crds []*unstructured.Unstructured
	if name == "external-secrets" {
		var err error
		if crds, err = charts.ExternalSecretsCRDs(context.Background()); err != nil {
			return "", err
		}
	}
	return charts.Local(dir, name, webhook.Webhook, crds...)
}

func (x expander) expand(v any, handles map[string]pulumi.Resource) any {
	switch v := v.(type) {
	case string:
		switch v {
		case "$webhook-up":
			return map[string]any{"url": x.up.URL(), "caBundle": x.up.CABundle()}
		case "$webhook-down":
			return map[string]any{"url": x.down.URL(), "caBundle": x.down.CABundle()}
		}
		if name, ok := strings.CutPrefix(v, "$chart:"); ok {
			return x.chart(name)
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = x.expand(e, handles)
		}
		return out
	case map[string]any:
		if spec, ok := v["$crd"].([]any); ok {
			u, err := controlplane.Decode(testenv.CRD(spec[0].(string), spec[1].(string), spec[2].(string)))
			if err != nil {
				panic(err)
			}
			return u.Object
		}
		if ref, ok := v["$ref"].(string); ok {
			var name, namespace pulumi.StringPtrOutput
			switch r := handles[ref].(type) {
			case *kubeObject:
				name, namespace = r.Metadata.Name(), r.Metadata.Namespace()
			case *apiextensions.CustomResource:
				name, namespace = r.Metadata.Name(), r.Metadata.Namespace()
			}
			switch v["path"] {
			case "metadata.name":
				return name.Elem()
			case "metadata.namespace":
				return namespace.Elem()
			}
			panic(fmt.Sprintf("a $ref reads metadata.name or metadata.namespace, not %v", v["path"]))
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = x.expand(e, handles)
		}
		return out
	}
	return v
}

// apply creates an object in cp as another stack would have (a CRD: until it is served).
func apply(t *testing.T, cp *controlplane.ControlPlane, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	ri, err := cp.ResourceFor(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Create(context.Background(), u, k8smeta.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if u.GetKind() == "CustomResourceDefinition" {
		group, _, _ := unstructured.NestedString(obj, "spec", "group")
		for deadline := time.Now().Add(30 * time.Second); !served(cp, group+"/v1"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not served", u.GetName())
			}
		}
	}
	return u
}

func remove(cp *controlplane.ControlPlane, u *unstructured.Unstructured) {
	if ri, err := cp.ResourceFor(context.Background(), u); err == nil {
		_ = ri.Delete(context.Background(), u.GetName(), k8smeta.DeleteOptions{})
	}
}

// served says whether cp's API server serves group/version (a CRD is established).
func served(cp *controlplane.ControlPlane, groupVersion string) bool {
	_, err := cp.Client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	return err == nil
}

type component struct{ pulumi.ResourceState }

// program is the shape as a Go program.
func program(sh shape, x expander) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "2m"}); err != nil {
			return err
		}
		handles := map[string]pulumi.Resource{}
		for _, it := range sh.Program {
			var opts []pulumi.ResourceOption
			if len(it.DependsOn) > 0 {
				var deps []pulumi.Resource
				for _, d := range it.DependsOn {
					deps = append(deps, handles[d])
				}
				opts = append(opts, pulumi.DependsOn(deps))
			}
			if it.Provider != "" {
				opts = append(opts, pulumi.Provider(handles[it.Provider].(pulumi.ProviderResource)))
			}
			if it.Parent != "" {
				opts = append(opts, pulumi.Parent(handles[it.Parent]))
			}
			var r pulumi.Resource
			var err error
			switch {
			case it.KubernetesProvider != nil:
				args := &kubernetes.ProviderArgs{Kubeconfig: pulumi.String(string(testenv.CP.Kubeconfig))}
				if it.KubernetesProvider["kubeconfig"] == "$other-cluster" {
					args.Kubeconfig = pulumi.String(string(x.other.Kubeconfig))
				}
				if ns := it.KubernetesProvider["namespace"]; ns != "" {
					args.Namespace = pulumi.String(ns)
				}
				r, err = kubernetes.NewProvider(ctx, it.Name, args)
			case it.Component != "":
				c := &component{}
				err = ctx.RegisterComponentResource(it.Component, it.Name, c)
				if err == nil {
					err = ctx.RegisterResourceOutputs(c, pulumi.Map{})
				}
				r = c
			case it.ChartV4 != nil:
				r, err = helmv4.NewChart(ctx, it.Name, &helmv4.ChartArgs{Chart: pulumi.String(x.expand(it.ChartV4["chart"], handles).(string)),
					Namespace: pulumi.String(it.ChartV4["namespace"])}, opts...)
			case it.Release != nil:
				r, err = helmv3.NewRelease(ctx, it.Name, &helmv3.ReleaseArgs{Chart: pulumi.String(x.expand(it.Release["chart"], handles).(string)),
					Namespace: pulumi.String(it.Release["namespace"])}, opts...)
			case it.ResourceReady != nil:
				a := it.ResourceReady
				r, err = readiness.NewResourceReady(ctx, it.Name, &readiness.ResourceReadyArgs{ApiVersion: pulumi.String(a["apiVersion"].(string)),
					Kind: pulumi.String(a["kind"].(string)), Namespace: pulumi.String(a["namespace"].(string)), Name: pulumi.String(a["name"].(string)),
					Exists: pulumi.Bool(a["exists"].(bool))}, opts...)
			case it.ConfigGroupV1 != nil:
				var objs []map[string]any
				for _, o := range x.expand(it.ConfigGroupV1, handles).([]any) {
					objs = append(objs, o.(map[string]any))
				}
				r, err = yaml.NewConfigGroup(ctx, it.Name, &yaml.ConfigGroupArgs{Objs: objs}, opts...)
			default:
				r, err = newObject(ctx, it.Name, x.expand(it.Object, handles).(map[string]any), opts)
			}
			if err != nil {
				return err
			}
			handles[it.Name] = r
		}
		return nil
	}
}

// kubeObject is any object as the Go SDK's typed resources register it (appsv1.NewDeployment:
// ctx.RegisterResource("kubernetes:apps/v1:Deployment", name, args, ...), with the same props).
type kubeObject struct {
	pulumi.CustomResourceState
	Metadata metav1.ObjectMetaOutput `pulumi:"metadata"`
}

// newObject registers obj as the Go SDK does: Kubernetes' own kinds as typed resources do,
// custom resources with apiextensions.NewCustomResource.
func newObject(ctx *pulumi.Context, name string, obj map[string]any, opts []pulumi.ResourceOption) (pulumi.Resource, error) {
	meta := &metav1.ObjectMetaArgs{}
	if m, ok := obj["metadata"].(map[string]any); ok {
		for k, field := range map[string]*pulumi.StringPtrInput{"name": &meta.Name, "namespace": &meta.Namespace} {
			switch v := m[k].(type) {
			case string:
				*field = pulumi.String(v)
			case pulumi.StringOutput: // a $ref
				*field = v
			}
		}
		for k, field := range map[string]*pulumi.StringMapInput{"labels": &meta.Labels, "annotations": &meta.Annotations} {
			if l, ok := m[k].(map[string]any); ok {
				sm := pulumi.StringMap{}
				for lk, lv := range l {
					sm[lk] = pulumi.String(lv.(string))
				}
				*field = sm
			}
		}
	}
	other := kubernetes.UntypedArgs{}
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			other[k] = v
		}
	}
	apiVersion, kind := obj["apiVersion"].(string), obj["kind"].(string)
	if group, _, hasGroup := strings.Cut(apiVersion, "/"); !hasGroup || group == "apps" || group == "batch" || strings.HasSuffix(group, ".k8s.io") {
		token := "kubernetes:" + apiVersion + ":" + kind
		if !hasGroup {
			token = "kubernetes:core/" + apiVersion + ":" + kind
		}
		other["apiVersion"], other["kind"], other["metadata"] = pulumi.String(apiVersion), pulumi.String(kind), meta
		var r kubeObject
		return &r, ctx.RegisterResource(token, name, other, &r, opts...)
	}
	return apiextensions.NewCustomResource(ctx, name, &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(apiVersion), Kind: pulumi.String(kind), Metadata: meta, OtherFields: other,
	}, opts...)
}
