package autogate

import (
	"fmt"
	"slices"
	"testing"
)

var sprintf = fmt.Sprintf

// Every static Secret reference of a pod spec, and the pull secrets of the ServiceAccount the
// pods run as.
func TestSecretsOfEveryReference(t *testing.T) {
	spec := obj(t, `
imagePullSecrets: [{name: pull}]
volumes:
- {name: a, secret: {secretName: vol}}
- {name: b, projected: {sources: [{secret: {name: proj}}]}}
- {name: c, csi: {driver: x, nodePublishSecretRef: {name: csi}}}
- {name: d, azureFile: {secretName: az, shareName: s}}
initContainers: [{name: i, env: [{name: X, valueFrom: {secretKeyRef: {name: init-env, key: k}}}]}]
containers: [{name: c, envFrom: [{secretRef: {name: env-from}}]}]
ephemeralContainers: [{name: e, envFrom: [{secretRef: {name: eph}}]}]
`)
	got := SecretsOf(spec)
	for _, want := range []string{"pull", "vol", "proj", "csi", "az", "init-env", "env-from", "eph"} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretsOf = %v, lacks %s", got, want)
		}
	}
}

func TestDecidePullSecrets(t *testing.T) {
	es := installer(t, "es", "kubernetes:external-secrets.io/v1:ExternalSecret", "ghcr", `
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr, namespace: web}
spec: {target: {name: ghcr-pull-secret}}
`)
	deployment := func(podSpec string) map[string]any {
		return obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: web}
spec:
  template:
    spec: `+podSpec)
	}
	sa := func(name, ns string) Installer {
		return installer(t, "sa-"+name, "kubernetes:core/v1:ServiceAccount", name, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: `+name+`, namespace: `+ns+`}
imagePullSecrets: [{name: ghcr-pull-secret}]
`)
	}
	// Autonamed (no metadata.name): pulumi-kubernetes names them `<Pulumi name>-<8 hex>`, and a
	// pod that refers to them carries that name (from their outputs) by the time it is decided.
	autoSA := installer(t, "sa-auto", "kubernetes:core/v1:ServiceAccount", "builder", `
apiVersion: v1
kind: ServiceAccount
metadata: {namespace: web}
imagePullSecrets: [{name: ghcr-pull-secret}]
`)
	autoES := installer(t, "es", "kubernetes:external-secrets.io/v1:ExternalSecret", "ghcr", `
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {namespace: web}
spec: {secretStoreRef: {name: vault}}
`)
	for _, c := range []struct {
		name       string
		podSpec    string
		installers []Installer
		gated      bool
	}{
		{"an autonamed ServiceAccount, referred to by the name it got (issue 47)", `{serviceAccountName: builder-0a1b2c3d, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{autoSA, es}, true},
		{"near miss: a name that is not its autoname", `{serviceAccountName: builder-other, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{autoSA, es}, false},
		{"near miss: its Pulumi name (another, named ServiceAccount)", `{serviceAccountName: builder, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{autoSA, es}, false},
		{"the Secret of an autonamed ExternalSecret with no target name", `{imagePullSecrets: [{name: ghcr-9f8e7d6c}], containers: [{name: c, image: ghcr.io/x}]}`, []Installer{autoES}, true},
		{"near miss: a Secret named as its Pulumi name", `{imagePullSecrets: [{name: ghcr}], containers: [{name: c, image: ghcr.io/x}]}`, []Installer{autoES}, false},
		{"imagePullSecrets of the pod (field report 001's ghcr-pull-secret)", `{imagePullSecrets: [{name: ghcr-pull-secret}], containers: [{name: c, image: ghcr.io/x}]}`, []Installer{es}, true},
		{"the pull secrets of the stack ServiceAccount it runs as", `{serviceAccountName: builder, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{sa("builder", "web"), es}, true},
		{"the default ServiceAccount's, with no serviceAccountName", `{containers: [{name: c, image: ghcr.io/x}]}`, []Installer{sa("default", "web"), es}, true},
		{"near miss: another ServiceAccount's", `{serviceAccountName: other, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{sa("builder", "web"), es}, false},
		{"near miss: a ServiceAccount of the same name in another namespace", `{serviceAccountName: builder, containers: [{name: c, image: ghcr.io/x}]}`, []Installer{sa("builder", "other"), es}, false},
		{"near miss: a pull secret of another name", `{imagePullSecrets: [{name: other}], containers: [{name: c, image: ghcr.io/x}]}`, []Installer{es}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(Input{Resource: Resource{Type: "kubernetes:apps/v1:Deployment", Name: "web", Object: deployment(c.podSpec)},
				Installers: c.installers}, fakeCluster{}, testIntercepts)
			gated := len(p.Gates) == 1 && p.Gates[0].Type == TypeExternalSecretReady &&
				(p.Gates[0].Args["name"] == "ghcr" || (len(p.Gates[0].ArgsFrom) == 1 && p.Gates[0].ArgsFrom[0].Output == "metadata.name"))
			if gated != c.gated || (!c.gated && len(p.Gates) != 0) {
				t.Errorf("gates = %+v, want gated %v", p.Gates, c.gated)
			}
		})
	}
	t.Run("a ServiceAccount with pull secrets is remembered, trimmed; one without is not", func(t *testing.T) {
		s := sa("builder", "web")
		p := Decide(Input{Resource: Resource{Type: s.Type, Name: s.Name, Object: s.Object}}, fakeCluster{}, testIntercepts)
		if !p.Remember || p.Installer["imagePullSecrets"] == nil {
			t.Errorf("plan = %+v", p)
		}
		plain := obj(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\n")
		if Decide(Input{Resource: Resource{Type: s.Type, Name: "x", Object: plain}}, fakeCluster{}, testIntercepts).Remember {
			t.Error("a ServiceAccount without pull secrets is remembered")
		}
	})
}
