package helmrelease

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// A helm.sh/v4:Chart writes no release record: it creates each rendered object as a
// pulumi-kubernetes child resource, and its `resources` output holds references to them. A
// reference carries the child's type token, which says its kind, and its ID, which says where it
// is; ChartObject turns the two into the ObjectRef a release's manifest would have given.

// kubeVersion is an API version as Kubernetes spells them: v1, v1beta1, v2alpha3.
var kubeVersion = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// componentGroups are the pulumi-kubernetes modules whose resources are not Kubernetes objects:
// helm.sh (Chart, Release), yaml (ConfigFile, ConfigGroup), kustomize (Directory).
var componentGroups = map[string]bool{"helm.sh": true, "yaml": true, "kustomize": true}

// ChartKind is the apiVersion and kind of the Kubernetes object a pulumi-kubernetes resource
// of type token typ stands for: kubernetes:<group>/<version>:<Kind>, group `core` for the core
// API (kubernetes:core/v1:Service is apiVersion v1, kind Service). Anything else, or a
// pulumi-kubernetes resource that is not one object (a Chart, a Release, a ConfigGroup, a
// DeploymentPatch, a ConfigMapList), is an error saying what it is.
func ChartKind(typ string) (apiVersion, kind string, err error) {
	rest, ok := strings.CutPrefix(typ, "kubernetes:")
	if !ok {
		return "", "", fmt.Errorf("type %s is not a pulumi-kubernetes resource (kubernetes:<group>/<version>:<Kind>)", typ)
	}
	mod, kind, ok := strings.Cut(rest, ":")
	group, version, hasVersion := strings.Cut(mod, "/")
	switch {
	case !ok || kind == "" || strings.Contains(kind, ":") || !hasVersion:
		return "", "", fmt.Errorf("type %s is not a Kubernetes object's (kubernetes:<group>/<version>:<Kind>)", typ)
	case componentGroups[group]:
		return "", "", fmt.Errorf("type %s is a pulumi-kubernetes component or Helm release, not a Kubernetes object: pass its `resources` (a Chart's, a ConfigGroup's), not the resource itself", typ)
	case !kubeVersion.MatchString(version):
		return "", "", fmt.Errorf("type %s: %q is not a Kubernetes API version (v1, v1beta1)", typ, version)
	case kind[0] < 'A' || kind[0] > 'Z':
		return "", "", fmt.Errorf("type %s: %q is not a Kubernetes kind (they start with a capital letter)", typ, kind)
	}
	if group == "core" {
		group = ""
	}
	if autogate.IsBuiltin(group) && (strings.HasSuffix(kind, "Patch") || strings.HasSuffix(kind, "List")) {
		return "", "", fmt.Errorf("type %s is a pulumi-kubernetes patch or list resource, not one Kubernetes object", typ)
	}
	if group == "" {
		return version, kind, nil
	}
	return group + "/" + version, kind, nil
}

// ChartObjectID is the namespace and name in a pulumi-kubernetes resource's ID: `namespace/name`
// for a namespaced object, `name` for a cluster-scoped one (namespace "").
func ChartObjectID(id string) (namespace, name string, err error) {
	parts := strings.Split(id, "/")
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		namespace, name = parts[0], parts[1]
	default:
		return "", "", fmt.Errorf("ID %q is not a Kubernetes object's (namespace/name or name)", id)
	}
	if err := placeProblem(namespace, name, len(parts) == 2); err != nil {
		return "", "", fmt.Errorf("ID %q: %w", id, err)
	}
	return namespace, name, nil
}

// placeProblem says why namespace and name cannot name an object (nil when they can).
func placeProblem(namespace, name string, namespaced bool) error {
	if namespaced {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
		}
	}
	if name == "" {
		return fmt.Errorf("no object name")
	}
	if errs := path.IsValidPathSegmentName(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// ParseObjectRef checks an object reference given by its fields (as ChartReady keeps the
// objects of a Chart's resources, and as a user may write them): apiVersion as Kubernetes
// spells it, a kind, a name, and a namespace for a namespaced object ("" for a cluster-scoped one).
func ParseObjectRef(apiVersion, kind, namespace, name string) (ObjectRef, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	switch {
	case apiVersion == "" || err != nil || !kubeVersion.MatchString(gv.Version):
		return ObjectRef{}, fmt.Errorf("apiVersion %q is not a Kubernetes API version (v1, apps/v1, example.com/v1beta1)", apiVersion)
	case gv.Group == "core":
		return ObjectRef{}, fmt.Errorf("apiVersion %q: the core API's apiVersion is %s (core/ is only in pulumi-kubernetes type tokens)", apiVersion, gv.Version)
	case kind == "" || kind[0] < 'A' || kind[0] > 'Z':
		return ObjectRef{}, fmt.Errorf("kind %q is not a Kubernetes kind (they start with a capital letter)", kind)
	}
	if err := placeProblem(namespace, name, namespace != ""); err != nil {
		return ObjectRef{}, err
	}
	return ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}, nil
}

// ChartObject is the object a pulumi-kubernetes resource of type token typ and ID id stands for
// (see ChartKind and ChartObjectID).
func ChartObject(typ, id string) (ObjectRef, error) {
	apiVersion, kind, err := ChartKind(typ)
	if err != nil {
		return ObjectRef{}, err
	}
	ns, name, err := ChartObjectID(id)
	if err != nil {
		return ObjectRef{}, fmt.Errorf("%s: %w", typ, err)
	}
	return ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}, nil
}
