package autogate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Installers of one cluster never gate objects of another; gates of a cluster other than the
// readiness provider's carry it in their keys and names.
func TestDecideClusters(t *testing.T) {
	hook := installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-hook", esoWebhook)
	other := "urn:pulumi:dev::p::pulumi:providers:kubernetes::staging"
	es := Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "ghcr", Object: obj(t, externalSecret)}
	served := fakeCluster{served: map[schema.GroupKind]bool{{Group: "external-secrets.io", Kind: "ExternalSecret"}: true}}

	onOther := es
	onOther.Cluster = other
	if p := Decide(Input{Resource: onOther, Installers: []Installer{hook}}, served, testIntercepts); len(p.Gates) != 0 {
		t.Errorf("an object of another cluster got the default cluster's webhook gates: %+v", p.Gates)
	}
	hookOther := hook
	hookOther.Cluster = other
	if p := Decide(Input{Resource: es, Installers: []Installer{hookOther}}, served, testIntercepts); len(p.Gates) != 0 {
		t.Errorf("an object of the default cluster got another cluster's webhook gates: %+v", p.Gates)
	}
	p := Decide(Input{Resource: onOther, Installers: []Installer{hookOther}}, served, testIntercepts)
	if len(p.Gates) != 2 {
		t.Fatalf("gates = %+v", p.Gates)
	}
	for _, g := range p.Gates {
		if !strings.HasSuffix(g.Key, "-staging") || g.Name != g.Key {
			t.Errorf("gate %s does not name its cluster", g.Key)
		}
	}
	if adm := gateOfType(t, p, TypeAdmissionReady); len(adm.AfterGates) != 1 || adm.AfterGates[0] != gateOfType(t, p, TypeResourceReady).Key {
		t.Errorf("afterGates %v do not name the exists gate of the same cluster", adm.AfterGates)
	}
}
