package autogate

import (
	"fmt"
	"slices"
)

// mountedSecrets applies rule 3: a workload whose pods name a Secret (a volume, an env var, an
// image pull secret, its own or its ServiceAccount's) that a stack Certificate or ExternalSecret
// in its namespace produces waits for that producer.
func (d *decider) mountedSecrets() {
	path, ok := podTemplateKinds[d.gvk.Group+"/"+d.gvk.Kind]
	if !ok {
		return
	}
	podSpec, _ := mapAt(d.in.Resource.Object, path...)
	secrets := SecretsOf(podSpec)
	for _, s := range d.serviceAccountPullSecrets(podSpec) {
		if !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return
	}
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		k := kindOf(inst.Type, inst.Object)
		if k != certificateInstaller && k != externalSecretInstaller {
			continue
		}
		if d.namespaceOf(inst) != d.namespace {
			continue
		}
		produced := producedSecret(inst)
		if produced == "" {
			// An autonamed ExternalSecret with no target name makes a Secret of its own real name,
			// which a pod names from its outputs: `<Pulumi name>-<8 hex>`.
			for _, s := range secrets {
				if autonamed(inst.Name, s) {
					produced = s
				}
			}
		}
		if produced == "" || !slices.Contains(secrets, produced) {
			continue
		}
		typ, what := TypeCertificateReady, "certificate"
		if k == externalSecretInstaller {
			typ, what = TypeExternalSecretReady, "externalsecret"
		}
		name, _ := installerName(inst)
		if name == "" {
			name = inst.Name // the key only: the gate's name input comes from the outputs
		}
		key := fmt.Sprintf("auto-%s-%s-%s", what, slug(d.namespace), slug(name))
		g := Gate{
			Key: key, Name: key, Type: typ,
			After:  []string{inst.ID},
			Reason: fmt.Sprintf("%s uses Secret %s, which %s %s/%s produces", d.what(), produced, str(inst.Object, "kind"), d.namespace, name),
		}
		g.Args = map[string]any{"namespace": d.namespace}
		nameArg(&g, g.Args, "name", inst)
		d.add(g)
	}
}

// producedSecret is the Secret a Certificate (spec.secretName) or an ExternalSecret
// (spec.target.name, else its own name) makes; "" when not known before it exists.
func producedSecret(inst *Installer) string {
	spec, _ := mapAt(inst.Object, "spec")
	if kindOf(inst.Type, inst.Object) == certificateInstaller {
		return str(spec, "secretName")
	}
	target, _ := mapAt(spec, "target")
	if n := str(target, "name"); n != "" {
		return n
	}
	n, _ := installerName(inst)
	return n
}

// namespaceOf is where a namespaced installer lives.
func (d *decider) namespaceOf(inst *Installer) string {
	md, _ := mapAt(inst.Object, "metadata")
	if ns := str(md, "namespace"); ns != "" {
		return ns
	}
	return d.cluster.DefaultNamespace()
}

// serviceAccountPullSecrets are the imagePullSecrets of the stack's ServiceAccount the pods run
// as (spec.serviceAccountName, else "default"): the kubelet pulls with them too.
func (d *decider) serviceAccountPullSecrets(podSpec map[string]any) []string {
	if podSpec == nil {
		return nil
	}
	sa := str(podSpec, "serviceAccountName")
	if sa == "" {
		sa = str(podSpec, "serviceAccount") // the deprecated alias the API server still honours
	}
	if sa == "" {
		sa = "default"
	}
	var out []string
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != serviceAccountInstaller || d.namespaceOf(inst) != d.namespace {
			continue
		}
		if !called(inst, sa) {
			continue
		}
		for _, ref := range items(inst.Object, "imagePullSecrets") {
			if n := str(ref, "name"); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// SecretsOf lists the Secrets a pod spec names statically: volumes (secret, projected
// sources), imagePullSecrets, and every container's (init, ephemeral too) envFrom and env
// secretKeyRef.
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
		// Volume plugins that read a Secret to mount (the kubelet fails the mount without it).
		csi, _ := mapAt(v, "csi", "nodePublishSecretRef")
		add(str(csi, "name"))
		az, _ := mapAt(v, "azureFile")
		add(str(az, "secretName"))
		for _, plugin := range []string{"cephfs", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos"} {
			ref, _ := mapAt(v, plugin, "secretRef")
			add(str(ref, "name"))
		}
	}
	for _, ref := range items(podSpec, "imagePullSecrets") {
		add(str(ref, "name"))
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

// called says whether name is the name inst really gets: the one written, or for an autonamed
// installer the one pulumi-kubernetes gives it (`<Pulumi name>-<8 hex>`, AssignNameIfAutonamable),
// which a reference to it (`serviceAccountName: sa.metadata.name`) carries once it was created.
func called(inst *Installer, name string) bool {
	if n, _ := installerName(inst); n != "" {
		return n == name
	}
	return autonamed(inst.Name, name)
}
