package autogate

import (
	"fmt"
	"strings"
)

// afterReleases applies rule 4, to what depends on a Helm v3 Release (whose objects a transform
// cannot see). Each dependent waits for what it needs of the release, no more (releaseNeed):
//   - what runs pods (which may call the release's services) or routes the API server's calls
//     to a service waits for the release (HelmReleaseReady: its resources ready, its webhooks
//     serving);
//   - anything else waits only for an admitted dry-run of itself after the release installed:
//     its kind served and every webhook that intercepts it answering (AdmissionReady);
//   - what the release's own workloads may consume is not held at all (consumedByReleases).
func (d *decider) afterReleases() {
	for _, id := range d.in.DependsOn {
		inst := d.installer(id)
		if inst == nil || kindOf(inst.Type, inst.Object) != releaseInstaller {
			continue
		}
		need, why := releaseNeed(d.in.Resource.Type, d.gvk.Group, d.gvk.Kind, d.in.Resource.Object)
		switch need {
		case needNothing:
			d.warnings = append(d.warnings, fmt.Sprintf(
				"%s %s depends on Release %s but is not held for it: the release's own pods may need a %s before they are ready, so waiting for them would wait for itself",
				d.gvk.Kind, d.in.Resource.Name, inst.Name, d.gvk.Kind))
		case needWorkloads:
			d.add(d.releaseGate(inst, why))
		case needAdmission:
			key := fmt.Sprintf("auto-admission-%s-%s-%s", slug(d.groupResource()), slugOr(d.namespace, "cluster"), slug(inst.Name))
			d.selfAdmitted = true
			d.add(Gate{
				Key: key, Name: key, Type: TypeAdmissionReady,
				Args:   d.admissionArgs(d.dryRunObject(), true),
				After:  []string{inst.ID},
				Reason: fmt.Sprintf("%s waits to be admitted after Helm release %s installed (its kind served, its webhooks answering)", d.what(), inst.Name),
			})
		}
	}
}

// releaseGate is the HelmReleaseReady of one Release installer.
func (d *decider) releaseGate(inst *Installer, why string) Gate {
	ns := str(inst.Object, "namespace")
	if ns == "" {
		ns = d.cluster.DefaultNamespace()
	}
	name, _ := installerName(inst)
	if name == "" {
		name = inst.Name // the key only: the gate's name input comes from the release's outputs
	}
	key := fmt.Sprintf("auto-helmrelease-%s-%s", slug(ns), slug(name))
	g := Gate{
		Key: key, Name: key, Type: TypeHelmReleaseReady,
		After:  []string{inst.ID},
		Args:   map[string]any{"namespace": ns},
		Reason: fmt.Sprintf("%s depends on Helm release %s (%s) and %s: the release must be ready and its webhooks serving", d.in.Resource.Name, inst.Name, ns, why),
	}
	nameArg(&g, g.Args, "name", inst)
	return g
}

// What a dependent of a Release needs of it.
type releaseNeedKind int

const (
	needAdmission releaseNeedKind = iota // its kind served and its admission answered
	needWorkloads                        // the release's workloads ready (HelmReleaseReady)
	needNothing                          // nothing: the release may need it
)

// releaseNeed decides what a dependent of a Release (typ, its group and kind, its props) needs
// of it, and why, for the gate's reason. Pure: table-tested in releases_test.go.
func releaseNeed(typ, group, kind string, obj map[string]any) (releaseNeedKind, string) {
	conversion, _ := mapAt(obj, "spec", "conversion")
	switch {
	case typ == releaseType:
		return needWorkloads, "what a Release installs is opaque (its workloads may call this one's services)"
	case kind == "":
		return needWorkloads, "its kind is not known while the program runs"
	case group == "" && consumedByReleases[kind]:
		return needNothing, ""
	case runsContainers(obj):
		return needWorkloads, "its pods may call the release's services"
	case group == "admissionregistration.k8s.io" && strings.HasSuffix(kind, "WebhookConfiguration"):
		return needWorkloads, "the API server calls its webhooks, which may be the release's services"
	case group == "apiregistration.k8s.io" && kind == "APIService":
		return needWorkloads, "the API server serves its API through a service, which may be the release's"
	case group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" && str(conversion, "strategy") == "Webhook":
		return needWorkloads, "the API server converts its objects through a webhook, which may be the release's service"
	}
	return needAdmission, ""
}

// runsContainers says whether an object runs containers: a pod spec anywhere in its spec (the
// built-in workloads, and custom ones such as a Rollout, a Knative Service or a KEDA ScaledJob):
// a list "containers" of objects with an image.
func runsContainers(obj map[string]any) bool {
	if str(obj, "kind") == "Pod" {
		return true
	}
	spec, _ := mapAt(obj, "spec")
	return hasContainers(spec, 0)
}

func hasContainers(v any, depth int) bool {
	if depth > 8 {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		if cs, ok := t["containers"].([]any); ok {
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok && m["image"] != nil {
					return true
				}
			}
		}
		for _, e := range t {
			if hasContainers(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasContainers(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// dependsOnRelease says whether the resource depends on a Helm v3 Release installer.
func (d *decider) dependsOnRelease() bool {
	for _, id := range d.in.DependsOn {
		if inst := d.installer(id); inst != nil && kindOf(inst.Type, inst.Object) == releaseInstaller {
			return true
		}
	}
	return false
}

// consumedByReleases are the core kinds a chart's pods may need before they are ready: a
// Secret or ConfigMap they mount (`existingSecret`), the ServiceAccount they run as, the claim
// they mount, the Service a StatefulSet's pods resolve their peers through. One of them that
// depends on a Release is often made for that release, so holding it until the release is
// ready could wait for itself (until the gate's timeout): it is created after the release
// starts installing, as its dependsOn says, and no later.
var consumedByReleases = map[string]bool{
	"Secret": true, "ConfigMap": true, "ServiceAccount": true, "PersistentVolumeClaim": true,
	"PersistentVolume": true, "Service": true, "Namespace": true,
}

func (d *decider) installer(id string) *Installer {
	for i := range d.in.Installers {
		if d.in.Installers[i].ID == id {
			return &d.in.Installers[i]
		}
	}
	return nil
}
