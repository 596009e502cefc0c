package autogate

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Autonamed objects (pulumi-kubernetes' default): dry-run under a name of the provider's shape,
// and installers' names taken from their outputs, never from their Pulumi names.
func TestDecideAutonamed(t *testing.T) {
	hook := installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-hook", esoWebhook)
	autonamedHook := hook
	autonamedHook.Object = obj(t, esoWebhook)
	delete(autonamedHook.Object["metadata"].(map[string]any), "name")
	es := `
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {namespace: team-a}
spec: {secretStoreRef: {name: vault, kind: ClusterSecretStore}}
`
	served := fakeCluster{served: map[schema.GroupKind]bool{{Group: "external-secrets.io", Kind: "ExternalSecret"}: true}}

	t.Run("an autonamed object is dry-run under its Pulumi name and 8 hex", func(t *testing.T) {
		p := Decide(Input{Resource: Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "ghcr", Object: obj(t, es)},
			Installers: []Installer{hook}}, served, testIntercepts)
		adm := gateOfType(t, p, TypeAdmissionReady)
		md := adm.Args["objects"].([]any)[0].(map[string]any)["metadata"].(map[string]any)
		if md["name"] != DryRunName("ghcr") || len(DryRunName("ghcr")) != len("ghcr-")+8 {
			t.Errorf("dry-run name = %v, want %s", md["name"], DryRunName("ghcr"))
		}
		if DryRunName("ghcr") != DryRunName("ghcr") || DryRunName("ghcr") == DryRunName("ghcr2") {
			t.Error("DryRunName must be stable per Pulumi name and differ between names")
		}
	})
	t.Run("near miss: a named object keeps its name; generateName is kept too", func(t *testing.T) {
		for y, want := range map[string]string{externalSecret: "ghcr", es: ""} {
			o := obj(t, y)
			if md := o["metadata"].(map[string]any); want == "" {
				md["generateName"] = "gen-"
			}
			p := Decide(Input{Resource: Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "x", Object: o},
				Installers: []Installer{hook}}, served, testIntercepts)
			md := gateOfType(t, p, TypeAdmissionReady).Args["objects"].([]any)[0].(map[string]any)["metadata"].(map[string]any)
			if md["name"] != nil && md["name"] != want || (want == "" && md["generateName"] != "gen-") {
				t.Errorf("metadata = %v", md)
			}
		}
	})
	t.Run("the input object is not changed", func(t *testing.T) {
		o := obj(t, es)
		before := obj(t, es)
		Decide(Input{Resource: Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "ghcr", Object: o},
			Installers: []Installer{hook}}, served, testIntercepts)
		if !reflect.DeepEqual(o, before) {
			t.Errorf("object changed: %v", o)
		}
	})
	t.Run("an autonamed webhook configuration: its exists gate reads the name from its outputs", func(t *testing.T) {
		p := Decide(Input{Resource: Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "ghcr", Object: obj(t, externalSecret)},
			Installers: []Installer{autonamedHook}}, served, testIntercepts)
		ex := gateOfType(t, p, TypeResourceReady)
		if _, ok := ex.Args["name"]; ok {
			t.Errorf("exists gate has a name input %v: the Pulumi name is never the object's", ex.Args["name"])
		}
		if want := []ArgFrom{{Arg: "name", Installer: "hook", Output: "metadata.name"}}; !reflect.DeepEqual(ex.ArgsFrom, want) {
			t.Errorf("argsFrom = %+v, want %+v", ex.ArgsFrom, want)
		}
	})
	t.Run("an autonamed Certificate: CertificateReady's name from its outputs, matched by secretName", func(t *testing.T) {
		cert := installer(t, "cert", "kubernetes:cert-manager.io/v1:Certificate", "web-tls", certificate)
		delete(cert.Object["metadata"].(map[string]any), "name")
		p := Decide(Input{Resource: Resource{Type: "kubernetes:apps/v1:Deployment", Name: "web", Object: obj(t, sprintf(deploymentMounting, "web-tls-secret"))},
			Installers: []Installer{cert}}, served, testIntercepts)
		g := gateOfType(t, p, TypeCertificateReady)
		if g.Args["namespace"] != "web" || g.Args["name"] != nil || len(g.ArgsFrom) != 1 || g.ArgsFrom[0].Output != "metadata.name" {
			t.Errorf("gate = %+v", g)
		}
	})
	t.Run("an autonamed Release: HelmReleaseReady's name from status.name", func(t *testing.T) {
		rel := Installer{ID: "rel", Type: releaseType, Name: "eso", Object: map[string]any{"chart": "x", "namespace": "eso"}}
		p := Decide(Input{Resource: Resource{Type: "kubernetes:apps/v1:Deployment", Name: "web", Object: obj(t, sprintf(deploymentMounting, "x"))},
			Installers: []Installer{rel}, DependsOn: []string{"rel"}}, served, testIntercepts)
		g := gateOfType(t, p, TypeHelmReleaseReady)
		if want := []ArgFrom{{Arg: "name", Installer: "rel", Output: "status.name"}}; !reflect.DeepEqual(g.ArgsFrom, want) || g.Args["namespace"] != "eso" {
			t.Errorf("gate = %+v", g)
		}
	})
}

func gateOfType(t *testing.T, p Plan, typ string) Gate {
	t.Helper()
	for _, g := range p.Gates {
		if g.Type == typ {
			return g
		}
	}
	t.Fatalf("no %s among %+v", typ, p.Gates)
	return Gate{}
}
