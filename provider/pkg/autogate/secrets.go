package autogate

import (
	"fmt"
	"slices"
)

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
