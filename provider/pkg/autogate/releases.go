package autogate

import "fmt"

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
