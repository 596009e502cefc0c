// Package autogate decides, for one Kubernetes registration of a Pulumi program, which readiness
// gates it must wait for, given what the program registered before it ("installers": CRDs,
// webhook configurations, Certificates, ExternalSecrets, Helm v3 Releases). It is pure: what
// needs the cluster (discovery, webhook matching) comes in through Cluster and Intercepts, so
// every rule is table-tested without one. The SDKs' autoGate transforms call it through the
// provider function readiness:index:autoGatePlan and keep none of these rules themselves.
package autogate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	Type       string         // Pulumi type token: kubernetes:apps/v1:Deployment
	Name       string         // Pulumi resource name
	ParentType string         // the parent's type token; "" at the top level
	Object     map[string]any // the props as plain JSON; unknowns absent
}

// Installer is an earlier registration the plan answered Remember for.
type Installer struct {
	ID     string
	Type   string
	Name   string
	Object map[string]any
}

// Options are the user's autoGate options the plan needs.
type Options struct {
	Timeout, StableFor, FailureGrace string
	Namespaces                       []string
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

// builtinGroups are the API groups Kubernetes itself serves: never "installed by a CRD".
// (*.k8s.io alone does not say it: gateway.networking.k8s.io is a CRD.)
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"authentication.k8s.io": true, "authorization.k8s.io": true, "certificates.k8s.io": true,
	"coordination.k8s.io": true, "discovery.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "internal.apiserver.k8s.io": true, "networking.k8s.io": true,
	"node.k8s.io": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true,
	"scheduling.k8s.io": true, "storage.k8s.io": true, "storagemigration.k8s.io": true,
}

// IsBuiltin says whether group is one of Kubernetes' own API groups.
func IsBuiltin(group string) bool { return builtinGroups[group] }

// componentTypes are the kubernetes components whose children the transform sees one by one;
// the component itself is never gated (a gate in front of a component whose child an
// installer is would deadlock).
var componentTypes = map[string]bool{
	"kubernetes:helm.sh/v4:Chart": true, "kubernetes:helm.sh/v3:Chart": true,
	"kubernetes:yaml/v2:ConfigGroup": true, "kubernetes:yaml/v2:ConfigFile": true,
	"kubernetes:yaml:ConfigGroup": true, "kubernetes:yaml:ConfigFile": true,
	"kubernetes:kustomize/v2:Directory": true, "kubernetes:kustomize:Directory": true,
}

const releaseType = "kubernetes:helm.sh/v3:Release"

// installerKind is what an installer can block.
type installerKind int

const (
	notInstaller installerKind = iota
	crdInstaller
	webhookInstaller
	certificateInstaller
	externalSecretInstaller
	releaseInstaller
)

func kindOf(typ string, obj map[string]any) installerKind {
	if typ == releaseType {
		return releaseInstaller
	}
	gvk, ok := objectGVK(typ, obj)
	if !ok {
		return notInstaller
	}
	switch {
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return crdInstaller
	case gvk.Group == "admissionregistration.k8s.io" &&
		(gvk.Kind == "ValidatingWebhookConfiguration" || gvk.Kind == "MutatingWebhookConfiguration"):
		return webhookInstaller
	case gvk.Group == "cert-manager.io" && gvk.Kind == "Certificate":
		return certificateInstaller
	case gvk.Group == "external-secrets.io" && gvk.Kind == "ExternalSecret":
		return externalSecretInstaller
	}
	return notInstaller
}

// objectGVK is the object's apiVersion/kind, else the one its type token names
// (kubernetes:<group>/<version>:<Kind>, core for kubernetes:core/v1:X).
func objectGVK(typ string, obj map[string]any) (schema.GroupVersionKind, bool) {
	if av, kind := str(obj, "apiVersion"), str(obj, "kind"); av != "" && kind != "" {
		gv, err := schema.ParseGroupVersion(av)
		if err == nil {
			return gv.WithKind(kind), true
		}
	}
	rest, ok := strings.CutPrefix(typ, "kubernetes:")
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	mod, kind, ok := strings.Cut(rest, ":")
	if !ok || kind == "" {
		return schema.GroupVersionKind{}, false
	}
	group, version, ok := strings.Cut(mod, "/")
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	if group == "core" {
		group = ""
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, true
}

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
	for _, have := range d.gates {
		if have.Key == g.Key {
			return
		}
	}
	d.gates = append(d.gates, g)
}

func withTiming(args map[string]any, o Options) map[string]any {
	for k, v := range map[string]string{"timeout": o.Timeout, "stableFor": o.StableFor, "failureGrace": o.FailureGrace} {
		if v != "" {
			args[k] = v
		}
	}
	return args
}

func (d *decider) objectName() string {
	md, _ := mapAt(d.in.Resource.Object, "metadata")
	if n := str(md, "name"); n != "" {
		return n
	}
	return d.in.Resource.Name
}

func (d *decider) what() string {
	if d.namespace != "" {
		return fmt.Sprintf("%s %s/%s", d.gvk.Kind, d.namespace, d.objectName())
	}
	return fmt.Sprintf("%s %s", d.gvk.Kind, d.objectName())
}

// crdAndAdmission applies rules 1 and 2: a kind a stack CRD serves or the cluster does not
// serve waits for it; an object a stack webhook may intercept waits for an admitted dry-run.
func (d *decider) crdAndAdmission() {
	unserved := false
	if d.crd == nil && !IsBuiltin(d.gvk.Group) {
		served, known := d.cluster.Serves(d.gvk.GroupKind())
		unserved = !served || !known
	}
	intercepted := false
	req := Request{
		GVR:       d.gvk.GroupVersion().WithResource(d.resource),
		Namespace: d.namespace,
		Labels:    stringMap(d.in.Resource.Object, "metadata", "labels"),
	}
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != webhookInstaller {
			continue
		}
		hooks := d.interceptingHooks(inst, req)
		if len(hooks) == 0 {
			continue
		}
		hook := hooks[0]
		intercepted = true
		existsKey := d.configExists(inst)
		after := []string{inst.ID}
		if d.crd != nil {
			after = append(after, d.crd.ID)
		}
		key := fmt.Sprintf("auto-admission-%s-%s-%s%s", slug(d.groupResource()), slugOr(d.namespace, "cluster"), slug(inst.Name), hookSuffix(inst, hooks))
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       map[string]any{"objects": []any{d.in.Resource.Object}},
			After:      after,
			AfterGates: []string{existsKey},
			Reason:     fmt.Sprintf("%s waits for webhook %s of %s to admit it", d.what(), hook, inst.Name),
		})
	}
	if intercepted {
		return // AdmissionReady waits for an unserved kind itself
	}
	switch {
	case d.crd != nil:
		md, _ := mapAt(d.crd.Object, "metadata")
		crdName := str(md, "name")
		if crdName == "" {
			crdName = d.resource + "." + d.gvk.Group
		}
		names := []any{crdName}
		key := "auto-crd-" + slug(crdName)
		d.add(Gate{
			Key: key, Name: key, Type: TypeCrdReady,
			Args:   map[string]any{"names": names},
			After:  []string{d.crd.ID},
			Reason: fmt.Sprintf("%s waits for CRD %s of %s to be established", d.what(), crdName, d.crd.Name),
		})
	case unserved:
		// Nothing in the stack names the CRD (a Release or a controller installs it): an
		// admitted dry-run of the object waits for the kind to be served, whatever its CRD is called.
		key := fmt.Sprintf("auto-admission-%s-%s", slug(d.resource+"."+d.gvk.Group), slugOr(d.namespace, "cluster"))
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:   map[string]any{"objects": []any{d.in.Resource.Object}},
			Reason: fmt.Sprintf("%s waits for the cluster to serve %s", d.what(), d.gvk.GroupKind()),
		})
	}
}

// configExists adds the gate proving a webhook configuration installer exists in the cluster
// and returns its key.
func (d *decider) configExists(inst *Installer) string {
	key := "auto-exists-" + slug(inst.Name)
	cfgKind := str(inst.Object, "kind")
	if cfgKind == "" {
		cfgKind = inst.Type[strings.LastIndex(inst.Type, ":")+1:]
	}
	d.add(Gate{
		Key: key, Name: key, Type: TypeResourceReady,
		Args: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": cfgKind,
			"name": configName(inst), "exists": true,
		},
		After:  []string{inst.ID},
		Reason: fmt.Sprintf("%s %s must exist before an admitted dry-run says anything", cfgKind, configName(inst)),
	})
	return key
}

// podAdmission applies rule 2 to a workload's pods: a stack webhook that intercepts the CREATE
// of its pods (a sidecar injector, a pod policy) is called by the workload's controller, not for
// the workload itself, so the workload waits for an admitted dry-run of a Pod like its template
// (its labels, annotations and spec, in its namespace). One gate per webhook and namespace.
func (d *decider) podAdmission() {
	path, ok := podTemplateKinds[d.gvk.Group+"/"+d.gvk.Kind]
	if !ok || d.gvk.Kind == "Pod" {
		return
	}
	podSpec, _ := mapAt(d.in.Resource.Object, path...)
	if podSpec == nil {
		return
	}
	tmplMeta, _ := mapAt(d.in.Resource.Object, append(slices.Clone(path[:len(path)-1]), "metadata")...)
	req := Request{
		GVR:       schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: d.namespace,
		Labels:    stringMap(tmplMeta, "labels"),
	}
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != webhookInstaller {
			continue
		}
		hooks := d.interceptingHooks(inst, req)
		if len(hooks) == 0 {
			continue
		}
		hook := hooks[0]
		existsKey := d.configExists(inst)
		md := map[string]any{"name": podName(d.objectName()), "namespace": d.namespace}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := tmplMeta[k]; ok {
				md[k] = v
			}
		}
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": podSpec}
		key := fmt.Sprintf("auto-admission-pods-%s-%s%s", slugOr(d.namespace, "cluster"), slug(inst.Name), hookSuffix(inst, hooks))
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       map[string]any{"objects": []any{pod}},
			After:      []string{inst.ID},
			AfterGates: []string{existsKey},
			Reason:     fmt.Sprintf("the pods of %s wait for webhook %s of %s to admit a Pod like them", d.what(), hook, inst.Name),
		})
	}
}

// podName names the dry-run Pod after its workload (a DNS label).
func podName(workload string) string {
	name := "autogate-" + workload
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}

// interceptingHooks are the names of a configuration installer's webhooks that may be called
// for req, in order; none when no webhook may. A failurePolicy Ignore webhook of the same
// component as the object is left out (see ownIgnoredHook).
func (d *decider) interceptingHooks(inst *Installer, req Request) []string {
	var names []string
	hooks, _ := inst.Object["webhooks"].([]any)
	for _, h := range hooks {
		hm, ok := h.(map[string]any)
		if !ok || !d.intercepts(hm, req) || d.ownIgnoredHook(inst, hm) {
			continue
		}
		n := str(hm, "name")
		if n == "" {
			n = "(unnamed)"
		}
		names = append(names, n)
	}
	return names
}

// ownIgnoredHook says whether hook is a failurePolicy Ignore webhook of the same component
// (Chart, ConfigGroup...) as the object: the webhook's own Deployment, RBAC and ServiceAccount
// must exist before its server can answer, so gating them on it would hang until the timeout,
// and an Ignore webhook that cannot answer lets them through anyway. Custom resources of a kind
// the component's own CRD installs are still gated (field report 002): the component serves
// them and means its webhook to see them.
func (d *decider) ownIgnoredHook(inst *Installer, hook map[string]any) bool {
	if str(hook, "failurePolicy") != "Ignore" || !componentTypes[d.in.Resource.ParentType] {
		return false
	}
	component := componentOf(d.in.Resource.Name)
	if component == "" || componentOf(inst.Name) != component {
		return false
	}
	return d.crd == nil || componentOf(d.crd.Name) != component
}

// componentOf is the component part of a component child's Pulumi name ("chart:ns/name" ->
// "chart"); "" for a name without one.
func componentOf(name string) string {
	c, _, ok := strings.Cut(name, ":")
	if !ok {
		return ""
	}
	return c
}

// hookSuffix names, in a batch key, which webhooks of the configuration intercept the object
// when not all of them do: objects that different webhooks intercept are proven by different
// representatives (a team=b object must not ride on the gate of a team=a one).
func hookSuffix(inst *Installer, matched []string) string {
	hooks, _ := inst.Object["webhooks"].([]any)
	if len(matched) == len(hooks) {
		return ""
	}
	return "-" + slug(strings.Join(matched, "-"))
}

// groupResource is the object's resource.group ("configmaps" for the core group): batch keys
// carry the group, since gateways.gateway.networking.k8s.io and gateways.networking.istio.io
// are different kinds served at different times.
func (d *decider) groupResource() string {
	if d.gvk.Group == "" {
		return d.resource
	}
	return d.resource + "." + d.gvk.Group
}

func configName(inst *Installer) string {
	md, _ := mapAt(inst.Object, "metadata")
	if n := str(md, "name"); n != "" {
		return n
	}
	return inst.Name
}

// podTemplateKinds are the workloads whose pod spec rule 3 reads, and where it is.
var podTemplateKinds = map[string][]string{
	"/Pod":             {"spec"},
	"apps/Deployment":  {"spec", "template", "spec"},
	"apps/StatefulSet": {"spec", "template", "spec"},
	"apps/DaemonSet":   {"spec", "template", "spec"},
	"apps/ReplicaSet":  {"spec", "template", "spec"},
	"batch/Job":        {"spec", "template", "spec"},
	"batch/CronJob":    {"spec", "jobTemplate", "spec", "template", "spec"},
}

// mountedSecrets applies rule 3: a workload that mounts a Secret a stack Certificate or
// ExternalSecret in its namespace produces waits for that producer.
func (d *decider) mountedSecrets() {
	path, ok := podTemplateKinds[d.gvk.Group+"/"+d.gvk.Kind]
	if !ok {
		return
	}
	podSpec, _ := mapAt(d.in.Resource.Object, path...)
	secrets := SecretsOf(podSpec)
	if len(secrets) == 0 {
		return
	}
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		k := kindOf(inst.Type, inst.Object)
		if k != certificateInstaller && k != externalSecretInstaller {
			continue
		}
		md, _ := mapAt(inst.Object, "metadata")
		ns := str(md, "namespace")
		if ns == "" {
			ns = d.cluster.DefaultNamespace()
		}
		if ns != d.namespace {
			continue
		}
		name := str(md, "name")
		if name == "" {
			continue // an autonamed producer: its name is not known here
		}
		var produced string
		if k == certificateInstaller {
			spec, _ := mapAt(inst.Object, "spec")
			produced = str(spec, "secretName")
		} else {
			target, _ := mapAt(inst.Object, "spec", "target")
			if produced = str(target, "name"); produced == "" {
				produced = name
			}
		}
		if !slices.Contains(secrets, produced) {
			continue
		}
		typ, what := TypeCertificateReady, "certificate"
		if k == externalSecretInstaller {
			typ, what = TypeExternalSecretReady, "externalsecret"
		}
		key := fmt.Sprintf("auto-%s-%s-%s", what, slug(ns), slug(name))
		d.add(Gate{
			Key: key, Name: key, Type: typ,
			Args:   map[string]any{"name": name, "namespace": ns},
			After:  []string{inst.ID},
			Reason: fmt.Sprintf("%s mounts Secret %s, which %s %s/%s produces", d.what(), produced, str(inst.Object, "kind"), ns, name),
		})
	}
}

// SecretsOf lists the Secrets a pod spec mounts or reads: volumes (secret, projected sources)
// and every container's envFrom and env secretKeyRef.
func SecretsOf(podSpec map[string]any) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, v := range items(podSpec, "volumes") {
		sec, _ := mapAt(v, "secret")
		add(str(sec, "secretName"))
		for _, src := range items(v, "projected", "sources") {
			ps, _ := mapAt(src, "secret")
			add(str(ps, "name"))
		}
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for _, c := range items(podSpec, list) {
			for _, ef := range items(c, "envFrom") {
				ref, _ := mapAt(ef, "secretRef")
				add(str(ref, "name"))
			}
			for _, e := range items(c, "env") {
				ref, _ := mapAt(e, "valueFrom", "secretKeyRef")
				add(str(ref, "name"))
			}
		}
	}
	return out
}

// afterReleases applies rule 4: a resource that depends on a Helm v3 Release waits for the
// release (HelmReleaseReady: its resources ready, its webhooks serving) and, for a custom
// resource, for an admitted dry-run of itself (its kind and webhook come from the release).
func (d *decider) afterReleases() {
	for _, id := range d.in.DependsOn {
		inst := d.installer(id)
		if inst == nil || kindOf(inst.Type, inst.Object) != releaseInstaller {
			continue
		}
		name, ns := str(inst.Object, "name"), str(inst.Object, "namespace")
		if ns == "" {
			ns = d.cluster.DefaultNamespace()
		}
		releaseKey := ""
		if name == "" {
			d.warnings = append(d.warnings, fmt.Sprintf(
				"%s depends on Release %s, which sets no `name` (autonamed): autoGate cannot tell which release to wait for; set its name, or add a HelmReleaseReady by hand",
				d.in.Resource.Name, inst.Name))
		} else {
			releaseKey = fmt.Sprintf("auto-helmrelease-%s-%s", slug(ns), slug(name))
			d.add(Gate{
				Key: releaseKey, Name: releaseKey, Type: TypeHelmReleaseReady,
				Args:   map[string]any{"name": name, "namespace": ns},
				After:  []string{inst.ID},
				Reason: fmt.Sprintf("%s depends on Helm release %s/%s, which must be ready and its webhooks serving", d.in.Resource.Name, ns, name),
			})
		}
		if d.gvk.Kind == "" || IsBuiltin(d.gvk.Group) {
			continue
		}
		key := fmt.Sprintf("auto-admission-%s-%s-%s", slug(d.groupResource()), slugOr(d.namespace, "cluster"), slug(inst.Name))
		g := Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:   map[string]any{"objects": []any{d.in.Resource.Object}},
			After:  []string{inst.ID},
			Reason: fmt.Sprintf("%s waits to be admitted after Helm release %s (its kind and webhooks come from it)", d.what(), inst.Name),
		}
		if releaseKey != "" {
			g.AfterGates = []string{releaseKey}
		}
		d.add(g)
	}
}

func (d *decider) installer(id string) *Installer {
	for i := range d.in.Installers {
		if d.in.Installers[i].ID == id {
			return &d.in.Installers[i]
		}
	}
	return nil
}

var nonName = regexp.MustCompile(`[^a-z0-9.-]+`)

// slug makes s usable in a gate's Pulumi name (chart children are named "chart:ns/name").
func slug(s string) string {
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func slugOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return slug(s)
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func mapAt(m map[string]any, path ...string) (map[string]any, bool) {
	cur := m
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func items(m map[string]any, path ...string) []map[string]any {
	parent, ok := mapAt(m, path[:len(path)-1]...)
	if !ok {
		return nil
	}
	list, _ := parent[path[len(path)-1]].([]any)
	var out []map[string]any
	for _, it := range list {
		if im, ok := it.(map[string]any); ok {
			out = append(out, im)
		}
	}
	return out
}

func stringMap(m map[string]any, path ...string) map[string]string {
	src, _ := mapAt(m, path...)
	out := map[string]string{}
	for k, v := range src {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
