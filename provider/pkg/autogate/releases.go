package autogate

import "fmt"

// afterReleases applies rule 4: a resource that depends on a Helm v3 Release waits for the
// release (HelmReleaseReady: its resources ready, its webhooks serving) and, for a custom
// resource, for an admitted dry-run of itself (its kind and webhook come from the release).
// What the release's own workloads may consume is never held for it (consumedByReleases).
func (d *decider) afterReleases() {
	for _, id := range d.in.DependsOn {
		inst := d.installer(id)
		if inst == nil || kindOf(inst.Type, inst.Object) != releaseInstaller {
			continue
		}
		if d.gvk.Group == "" && consumedByReleases[d.gvk.Kind] {
			d.warnings = append(d.warnings, fmt.Sprintf(
				"%s %s depends on Release %s but is not held for it: the release's own pods may need a %s before they are ready, so waiting for them would wait for itself",
				d.gvk.Kind, d.in.Resource.Name, inst.Name, d.gvk.Kind))
			continue
		}
		ns := str(inst.Object, "namespace")
		if ns == "" {
			ns = d.cluster.DefaultNamespace()
		}
		name, _ := installerName(inst)
		if name == "" {
			name = inst.Name // the key only: the gate's name input comes from the release's outputs
		}
		releaseKey := fmt.Sprintf("auto-helmrelease-%s-%s", slug(ns), slug(name))
		rg := Gate{
			Key: releaseKey, Name: releaseKey, Type: TypeHelmReleaseReady,
			After:  []string{inst.ID},
			Reason: fmt.Sprintf("%s depends on Helm release %s (%s), which must be ready and its webhooks serving", d.in.Resource.Name, inst.Name, ns),
		}
		rg.Args = map[string]any{"namespace": ns}
		nameArg(&rg, rg.Args, "name", inst)
		d.add(rg)
		if d.gvk.Kind == "" || IsBuiltin(d.gvk.Group) {
			continue
		}
		key := fmt.Sprintf("auto-admission-%s-%s-%s", slug(d.groupResource()), slugOr(d.namespace, "cluster"), slug(inst.Name))
		d.selfAdmitted = true
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       map[string]any{"objects": []any{d.dryRunObject()}},
			After:      []string{inst.ID},
			AfterGates: []string{releaseKey},
			Reason:     fmt.Sprintf("%s waits to be admitted after Helm release %s (its kind and webhooks come from it)", d.what(), inst.Name),
		})
	}
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
