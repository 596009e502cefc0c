// Package autogate decides, for one Kubernetes registration of a Pulumi program, which readiness
// gates it must wait for, given what the program registered before it ("installers": CRDs,
// webhook configurations, Certificates, ExternalSecrets, Helm v3 Releases). It is pure: what
// needs the cluster (discovery, webhook matching) comes in through Cluster and Intercepts, so
// every rule is table-tested without one. The SDKs' autoGate transforms call it through the
// provider function readiness:index:autoGateDecide (through pkg/planner) and keep none of these rules themselves.
package autogate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/retry"
)

// OptOutAnnotation set to "false" in an object's metadata keeps autoGate off it.
const OptOutAnnotation = "readiness.io/auto-gate"

// Gate tokens the plan hands out.
const (
	TypeCrdReady            = "readiness:index:CrdReady"
	TypeAdmissionReady      = "readiness:index:AdmissionReady"
	TypeResourceReady       = "readiness:index:ResourceReady"
	TypeHelmReleaseReady    = "readiness:index:HelmReleaseReady"
	TypeCertificateReady    = "readiness:index:CertificateReady"
	TypeExternalSecretReady = "readiness:index:ExternalSecretReady"
)

// Resource is one registration as the SDK's transform sees it.
type Resource struct {
	Type       string // Pulumi type token: kubernetes:apps/v1:Deployment
	Name       string // Pulumi resource name
	ParentType string // the parent's type token; "" at the top level
	// Parent is the SDK's handle for the parent component (its URN); "" at the top level or
	// from an older SDK (then the component is read from the Pulumi name, as Chart v4 names it).
	Parent string
	Object map[string]any // the props as plain JSON; unknowns absent
	// Cluster names the cluster the registration's kubernetes provider talks to, as the SDK
	// tells clusters apart: "" for the one the readiness provider answering the plan talks to.
	Cluster string
}

// Installer is an earlier registration the plan answered Remember for.
type Installer struct {
	ID      string
	Type    string
	Name    string
	Object  map[string]any
	Cluster string // as Resource.Cluster: an installer blocks only registrations of its own cluster
	Parent  string // as Resource.Parent
}

// Options are the user's autoGate options the plan needs.
type Options struct {
	Timeout, StableFor, FailureGrace string
	Namespaces                       []string
	// Retried says the SDK gave every Kubernetes registration autoGate's error hook, which
	// retries a create the API server could not admit for a failed webhook call (docs/retry.md).
	Retried bool
}

// Input is everything one decision needs.
type Input struct {
	Resource   Resource
	Installers []Installer
	DependsOn  []string // installer IDs the resource already depends on
	Options    Options
}

// Gate is one gate resource the registration must depend on. Key names the batch: the SDK makes
// one gate per key and later registrations with the same key depend on that one.
type Gate struct {
	Key   string
	Name  string
	Type  string
	Args  map[string]any
	After []string // installer IDs the gate must depend on
	// AfterGates are keys of gates (earlier in the same answer) the gate must depend on: an
	// AdmissionReady depends on proof that the webhook configuration it is about exists, since
	// a dependsOn on a component's child, known to the SDK only by URN, does not wait for its
	// create, and an admitted dry-run before the configuration exists proves nothing.
	AfterGates []string
	Reason     string
	// ArgsFrom are args the SDK takes from an installer's outputs once the engine has created
	// it: the name pulumi-kubernetes gave an autonamed installer exists nowhere else.
	ArgsFrom []ArgFrom
	// Ahead: the provider may begin the gate's first rounds as the registration is decided
	// (startsAhead); its Create adopts a pass begun at most probe.ProofReuse before it.
	Ahead bool
}

// ArgFrom is one gate arg read from an installer's outputs: Arg = outputs at Output (a dotted
// path: "metadata.name", "status.name").
type ArgFrom struct {
	Arg, Installer, Output string
}

// Plan is the answer for one registration.
type Plan struct {
	Remember bool
	// Installer is what the SDK remembers when Remember is set: the object trimmed to what the
	// rules read (TrimInstaller).
	Installer map[string]any
	Gates     []Gate
	Warnings  []string
}

// Cluster is what the plan may ask the cluster (discovery). Every answer may be "unknown"
// (known false): the plan then assumes the worse case.
type Cluster interface {
	// Serves says whether the cluster serves group/kind at any version.
	Serves(gk schema.GroupKind) (served, known bool)
	// Resource maps a kind to its resource (plural) and scope.
	Resource(gvk schema.GroupVersionKind) (resource string, namespaced bool, known bool)
	// DefaultNamespace is where a namespaced object without metadata.namespace goes.
	DefaultNamespace() string
	// Webhooks are the webhook configurations the cluster holds now; known false when they
	// cannot be read (RBAC).
	Webhooks() (configs []WebhookConfig, known bool)
	// Admits says whether a dry run of obj is admitted now, every webhook that intercepts it
	// answering; key names what the dry run proves (one per key is enough), hooks the webhooks
	// that must answer (WebhookID: one that answered for another object a moment ago answers).
	// Anything short of an admission in time counts as false: the rule then gates.
	Admits(key string, obj map[string]any, hooks []string) bool
}

// Request is a CREATE of one object, as a webhook's rules and selectors see it.
type Request struct {
	GVR       schema.GroupVersionResource
	Namespace string // "" for a cluster-scoped object
	Labels    map[string]string
}

// Intercepts says whether a webhook (one entry of a configuration's webhooks[], as JSON) may
// be called for req: rules, namespaceSelector, objectSelector, with namespace labels unknown
// counted as matching. The provider passes its own webhook matching.
type Intercepts func(webhook map[string]any, req Request) bool

// Decide is the plan for one registration.
func Decide(in Input, cluster Cluster, intercepts Intercepts) Plan {
	r := in.Resource
	if !strings.HasPrefix(r.Type, "kubernetes:") || componentTypes[r.Type] {
		return Plan{}
	}
	kind := kindOf(r.Type, r.Object)
	plan := Plan{Remember: kind != notInstaller}
	if plan.Remember {
		plan.Installer = TrimInstaller(r.Type, r.Object)
	}
	if optedOut(r.Object) {
		return plan
	}
	gvk, ok := objectGVK(r.Type, r.Object)
	if !ok || r.Type == releaseType {
		gvk = schema.GroupVersionKind{}
	}
	// Installers of another cluster never gate this registration (nor are they sent to it: an
	// SDK may still, and this keeps the rule in one place).
	in.Installers = slices.DeleteFunc(slices.Clone(in.Installers), func(i Installer) bool { return i.Cluster != r.Cluster })
	in.DependsOn = slices.Clone(in.DependsOn)
	d := decider{in: in, cluster: cluster, intercepts: intercepts, gvk: gvk}
	d.resolve()
	if len(in.Options.Namespaces) > 0 && !slices.Contains(in.Options.Namespaces, d.namespace) {
		return plan
	}
	if gvk.Kind != "" {
		d.crdAndAdmission()
		d.podAdmission()
		d.mountedSecrets()
	}
	d.afterReleases()
	if gvk.Kind != "" {
		d.clusterAdmission()
	}
	for i := range d.gates {
		d.gates[i].Ahead = startsAhead(in, d.gates[i])
	}
	plan.Gates, plan.Warnings = d.gates, d.warnings
	return plan
}

func optedOut(obj map[string]any) bool {
	ann, _ := mapAt(obj, "metadata", "annotations")
	v, _ := ann[OptOutAnnotation].(string)
	return strings.EqualFold(v, "false")
}

type decider struct {
	in         Input
	cluster    Cluster
	intercepts Intercepts
	gvk        schema.GroupVersionKind

	resource   string // plural
	namespaced bool
	namespace  string // "" when cluster-scoped
	crd        *Installer
	// selfAdmitted, podsAdmitted: an AdmissionReady of the object (of a workload's Pod) is
	// among the gates already; its dry run goes through every webhook of the cluster.
	selfAdmitted, podsAdmitted bool

	gates    []Gate
	warnings []string
}

// resolve finds the object's resource, scope and namespace: from a CRD the stack installs,
// else discovery, else a guess (namespaced, the lowercase plural).
func (d *decider) resolve() {
	obj := d.in.Resource.Object
	if d.gvk.Kind == "" { // a Release: its namespace
		d.namespace = str(obj, "namespace")
		if d.namespace == "" {
			d.namespace = d.cluster.DefaultNamespace()
		}
		return
	}
	for i := len(d.in.Installers) - 1; i >= 0; i-- {
		inst := d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != crdInstaller {
			continue
		}
		spec, _ := mapAt(inst.Object, "spec")
		names, _ := mapAt(inst.Object, "spec", "names")
		if str(spec, "group") == d.gvk.Group && str(names, "kind") == d.gvk.Kind {
			d.crd = &d.in.Installers[i]
			d.resource = str(names, "plural")
			d.namespaced = str(spec, "scope") != "Cluster"
			break
		}
	}
	if d.crd == nil {
		if res, namespaced, known := d.cluster.Resource(d.gvk); known {
			d.resource, d.namespaced = res, namespaced
		} else {
			d.namespaced = true
		}
	}
	if d.resource == "" {
		plural, _ := meta.UnsafeGuessKindToResource(d.gvk)
		d.resource = plural.Resource
	}
	if d.namespaced {
		md, _ := mapAt(obj, "metadata")
		d.namespace = str(md, "namespace")
		if d.namespace == "" {
			d.namespace = d.cluster.DefaultNamespace()
		}
	}
}

func (d *decider) add(g Gate) {
	g.Args = withTiming(g.Args, d.in.Options)
	if c := d.in.Resource.Cluster; c != "" {
		// Gate keys and names carry the cluster: the same webhook in two clusters is two gates.
		g.Key += "-" + clusterSlug(c)
		g.Name += "-" + clusterSlug(c)
		g.AfterGates = slices.Clone(g.AfterGates)
		for i := range g.AfterGates {
			g.AfterGates[i] += "-" + clusterSlug(c)
		}
	}
	for _, have := range d.gates {
		if have.Key == g.Key {
			return
		}
	}
	d.gates = append(d.gates, g)
}

// admissionArgs are an AdmissionReady's args for obj. own says obj is the registration's own
// object: when the hook retries that create (Options.Retried, a type retry.Retryable takes), a
// webhook that flaps after one admitted round fails it visibly and it is tried again once proven,
// so the gate is told (`retried`: one round where only failurePolicy Fail webhooks intercept).
// A Pod like a workload's pods is created by a controller, which no hook of ours retries.
func (d *decider) admissionArgs(obj map[string]any, own bool) map[string]any {
	args := map[string]any{"objects": []any{obj}}
	if own && d.in.Options.Retried && retry.Retryable(d.in.Resource.Type) {
		args["retried"] = true
	}
	return args
}

func withTiming(args map[string]any, o Options) map[string]any {
	for k, v := range map[string]string{"timeout": o.Timeout, "stableFor": o.StableFor, "failureGrace": o.FailureGrace} {
		if v != "" {
			args[k] = v
		}
	}
	return args
}

// dryRunObject is the registration's object as the kubernetes provider will create it.
func (d *decider) dryRunObject() map[string]any {
	return dryRunObject(d.in.Resource.Name, d.in.Resource.Object)
}

// objectName is the object's name, or the name pulumi-kubernetes will give it (autonamed).
func (d *decider) objectName() string {
	md, _ := mapAt(d.in.Resource.Object, "metadata")
	if n := str(md, "name"); n != "" {
		return n
	}
	if g := str(md, "generateName"); g != "" {
		return g + "xxxxx"
	}
	return DryRunName(d.in.Resource.Name)
}

func (d *decider) what() string {
	if d.namespace != "" {
		return fmt.Sprintf("%s %s/%s", d.gvk.Kind, d.namespace, d.objectName())
	}
	return fmt.Sprintf("%s %s", d.gvk.Kind, d.objectName())
}
