package autogate

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestStartsAhead is the table of when a gate's first rounds may begin at the decision: only
// when nothing it waits for can still change because of the program. Near misses: an installer
// the registration does not depend on (autoGate's own ordering, not the SDK's), one that is a
// component (its URN resolves before its children are created), a gate chain, inputs read from
// an installer's outputs, a stable window, a gate that is not an AdmissionReady.
func TestStartsAhead(t *testing.T) {
	release := Installer{ID: "rel", Type: releaseType, Name: "cert-manager"}
	hook := Installer{ID: "hook", Type: "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", Name: "eso:webhook"}
	chart := Installer{ID: "chart", Type: "kubernetes:helm.sh/v4:Chart", Name: "eso"}
	admission := Gate{Type: TypeAdmissionReady, After: []string{"rel"}}
	cases := []struct {
		name string
		in   Input
		g    Gate
		want bool
	}{
		{"after a Release the registration depends on", Input{Installers: []Installer{release}, DependsOn: []string{"rel"}}, admission, true},
		{"after nothing (a kind the cluster does not serve yet)", Input{}, Gate{Type: TypeAdmissionReady}, true},
		{"near miss: after a Release the registration does not depend on (written above it)", Input{Installers: []Installer{release}}, admission, false},
		{"near miss: after a component (its URN resolves before its children are created)",
			Input{Installers: []Installer{chart}, DependsOn: []string{"chart"}}, Gate{Type: TypeAdmissionReady, After: []string{"chart"}}, false},
		{"near miss: after an installer the session does not know", Input{DependsOn: []string{"rel"}}, admission, false},
		{"near miss: after a gate proving the webhook configuration exists",
			Input{Installers: []Installer{hook}, DependsOn: []string{"hook"}}, Gate{Type: TypeAdmissionReady, After: []string{"hook"}, AfterGates: []string{"auto-exists-hook"}}, false},
		{"near miss: an input read from an installer's outputs",
			Input{Installers: []Installer{release}, DependsOn: []string{"rel"}}, Gate{Type: TypeAdmissionReady, After: []string{"rel"}, ArgsFrom: []ArgFrom{{Arg: "name", Installer: "rel", Output: "status.name"}}}, false},
		{"near miss: a stable window one early pass cannot cover",
			Input{Installers: []Installer{release}, DependsOn: []string{"rel"}, Options: Options{StableFor: "5s"}}, admission, false},
		{"near miss: a HelmReleaseReady (watch-driven: nothing slow to begin early)",
			Input{Installers: []Installer{release}, DependsOn: []string{"rel"}}, Gate{Type: TypeHelmReleaseReady, After: []string{"rel"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := startsAhead(c.in, c.g); got != c.want {
				t.Fatalf("startsAhead = %v, want %v", got, c.want)
			}
		})
	}
}

// TestDecideMarksAhead: Decide itself marks the gates (the provider's session reads the mark,
// never the rule): the AdmissionReady of a ClusterIssuer after the Release it depends on starts
// ahead; an ExternalSecret a stack webhook intercepts waits behind the gate proving that
// configuration exists, so neither of its gates does.
func TestDecideMarksAhead(t *testing.T) {
	release := Installer{ID: "rel", Type: releaseType, Name: "cert-manager", Object: map[string]any{"name": "cert-manager", "namespace": "cert-manager"}}
	issuer := Resource{Type: "kubernetes:cert-manager.io/v1:ClusterIssuer", Name: "selfsigned",
		Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": map[string]any{"name": "selfsigned"}, "spec": map[string]any{"selfSigned": map[string]any{}}}}
	cluster := fakeCluster{served: map[schema.GroupKind]bool{{Group: "cert-manager.io", Kind: "ClusterIssuer"}: true}}
	plan := Decide(Input{Resource: issuer, Installers: []Installer{release}, DependsOn: []string{"rel"}}, cluster, testIntercepts)
	if len(plan.Gates) != 1 || plan.Gates[0].Type != TypeAdmissionReady || !plan.Gates[0].Ahead {
		t.Fatalf("after the Release it depends on: gates %+v, want one AdmissionReady that starts ahead", plan.Gates)
	}
	hook := installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso:external-secrets/externalsecret-validate", esoWebhook)
	es := Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "ghcr"}
	es.Object = installer(t, "es", es.Type, es.Name, externalSecret).Object
	plan = Decide(Input{Resource: es, Installers: []Installer{hook}, DependsOn: []string{"hook"}}, fakeCluster{}, testIntercepts)
	if len(plan.Gates) != 2 {
		t.Fatalf("behind a stack webhook: gates %+v, want the configuration's ResourceReady and an AdmissionReady", plan.Gates)
	}
	for _, g := range plan.Gates {
		if g.Ahead {
			t.Fatalf("behind a stack webhook: gate %s starts ahead", g.Key)
		}
	}
}
