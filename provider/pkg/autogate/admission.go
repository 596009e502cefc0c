package autogate

import (
	"fmt"
	"strings"
)

// crdAndAdmission applies rules 1 and 2: a kind a stack CRD serves or the cluster does not
// serve waits for it; an object a stack webhook may intercept waits for an admitted dry-run.
func (d *decider) crdAndAdmission() {
	unserved := false
	if d.crd == nil && !IsBuiltin(d.gvk.Group) && !d.dependsOnRelease() {
		// A Release it depends on serves its kind: afterReleases decides, without asking (decided
		// before or after the release installed the CRD, the answer is the same).
		served, known := d.cluster.Serves(d.gvk.GroupKind())
		unserved = !served || !known
	}
	intercepted := false
	req := Request{
		GVR:       d.gvk.GroupVersion().WithResource(d.resource),
		Namespace: d.namespace,
		Labels:    stringMap(d.in.Resource.Object, "metadata", "labels"),
	}
	d.eachInterceptingConfig(req, func(inst *Installer, hooks []string, existsKey string) {
		intercepted = true
		after := []string{inst.ID}
		if d.crd != nil {
			after = append(after, d.crd.ID)
		}
		key := fmt.Sprintf("auto-admission-%s-%s-%s%s", slug(d.groupResource()), slugOr(d.namespace, "cluster"), slug(inst.Name), hookSuffix(inst, hooks))
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       d.admissionArgs(d.dryRunObject(), true),
			After:      after,
			AfterGates: []string{existsKey},
			Reason:     fmt.Sprintf("%s waits for webhook %s of %s to admit it", d.what(), hooks[0], inst.Name),
		})
	})
	if intercepted {
		d.selfAdmitted = true
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
		d.selfAdmitted = true
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:   d.admissionArgs(d.dryRunObject(), true),
			Reason: fmt.Sprintf("%s waits for the cluster to serve %s", d.what(), d.gvk.GroupKind()),
		})
	}
}

// eachInterceptingConfig calls f for every webhook configuration installer that may intercept
// req, with the names of its webhooks that may, once the gate proving it exists is added.
func (d *decider) eachInterceptingConfig(req Request, f func(inst *Installer, hooks []string, existsKey string)) {
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != webhookInstaller {
			continue
		}
		if hooks := d.interceptingHooks(inst, req); len(hooks) > 0 {
			f(inst, hooks, d.configExists(inst))
		}
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
	g := Gate{
		Key: key, Name: key, Type: TypeResourceReady,
		After:  []string{inst.ID},
		Reason: fmt.Sprintf("%s %s must exist before an admitted dry-run says anything", cfgKind, configName(inst)),
	}
	g.Args = map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": cfgKind, "exists": true}
	// An autonamed configuration's name is in its outputs only (never its Pulumi name).
	nameArg(&g, g.Args, "name", inst)
	d.add(g)
	return key
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
	if d.in.Resource.Parent != "" {
		// The SDK says which component each is a child of: Chart v4's "<chart>:ns/name", Chart
		// v3's and ConfigFile v1's "ns/name" alike.
		return inst.Parent == d.in.Resource.Parent && (d.crd == nil || d.crd.Parent != d.in.Resource.Parent)
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

// configName names a configuration installer in messages: its name, or its Pulumi name when
// the provider names it.
func configName(inst *Installer) string {
	if n, _ := installerName(inst); n != "" {
		return n
	}
	return inst.Name + " (autonamed)"
}
