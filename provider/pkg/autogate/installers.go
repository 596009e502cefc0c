package autogate

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

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
	// A ServiceAccount blocks nothing itself, but the imagePullSecrets it names are pulled with
	// by every pod that runs as it: rule 3 reads them.
	serviceAccountInstaller
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
	case gvk.Group == "" && gvk.Kind == "ServiceAccount" && obj["imagePullSecrets"] != nil:
		return serviceAccountInstaller
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

// InstallerOf says whether a registration can block others (an installer), and what of it the
// rules read later (TrimInstaller).
func InstallerOf(typ string, obj map[string]any) (map[string]any, bool) {
	if kindOf(typ, obj) == notInstaller {
		return nil, false
	}
	return TrimInstaller(typ, obj), true
}

// MayGate says whether a registration of type installer can, by some rule, gate one of type typ
// written below it, whatever their objects: what typ's decision must wait for in program order.
// A webhook configuration may intercept any kind but its own; a CRD serves custom kinds; a
// Certificate's or ExternalSecret's Secret, and a ServiceAccount's pull secrets, are used by the
// pods of workloads. A Release gates only what depends on it, which registers after it anyway.
func MayGate(installer, typ string) bool {
	if installer == releaseType {
		return false
	}
	inst, ok := objectGVK(installer, nil)
	if !ok {
		return true // a type token that names no kind: any
	}
	gvk, ok := objectGVK(typ, nil)
	if !ok {
		return typ != releaseType
	}
	switch {
	case inst.Group == "admissionregistration.k8s.io" && strings.HasSuffix(inst.Kind, "WebhookConfiguration"):
		// The API server calls no webhook for webhook configurations (nor a Release, which is no object).
		return !(gvk.Group == "admissionregistration.k8s.io" && strings.HasSuffix(gvk.Kind, "WebhookConfiguration"))
	case inst.Group == "apiextensions.k8s.io" && inst.Kind == "CustomResourceDefinition":
		return !IsBuiltin(gvk.Group)
	case inst.Group == "cert-manager.io" && inst.Kind == "Certificate",
		inst.Group == "external-secrets.io" && inst.Kind == "ExternalSecret",
		inst.Group == "" && inst.Kind == "ServiceAccount":
		_, pods := podTemplateKinds[gvk.Group+"/"+gvk.Kind]
		return pods
	}
	return false
}
