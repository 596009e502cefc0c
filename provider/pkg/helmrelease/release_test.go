package helmrelease

import (
	"encoding/base64"
	"strings"
	"testing"
)

const manifest = `---
# Source: app/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata: {name: app-creds}
stringData: {password: MARKER-should-be-dropped}
---
# Source: app/templates/deploy.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: web}
spec: {replicas: 1}
---
# only a comment
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: app-webhook}
webhooks: []
`

func TestRoundTripAndManifestRefs(t *testing.T) {
	enc, err := Encode("app", "web", 3, "deployed", "app", "1.2.3", "4.5.6", manifest)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode([]byte(enc))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "app" || r.Revision != 3 || r.Status != "deployed" || r.Chart != "app" || r.ChartVersion != "1.2.3" || r.App != "4.5.6" {
		t.Errorf("release = %+v", r)
	}
	if len(r.Objects) != 3 || r.Objects[0].String() != "Secret app-creds" || r.Objects[1].String() != "Deployment web/app" {
		t.Errorf("objects = %v", r.Objects)
	}
	if len(r.Webhooks) != 1 {
		t.Errorf("webhooks = %v", r.Webhooks)
	}
	if strings.Contains(strings.ReplaceAll(strings.Join([]string{r.Name, r.Chart}, ""), " ", ""), "MARKER") {
		t.Error("secret data kept")
	}
	// Plain (not gzipped) JSON records decode too, as older Helm wrote them.
	plain := base64.StdEncoding.EncodeToString([]byte(`{"name":"x","version":1,"info":{"status":"deployed"},"manifest":""}`))
	if r, err := Decode([]byte(plain)); err != nil || r.Name != "x" {
		t.Errorf("plain record: %v %v", r, err)
	}
	for _, bad := range []string{"!!!", base64.StdEncoding.EncodeToString([]byte("not json"))} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) should fail", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	enc, _ := Encode("app", "web", 1, "deployed", "app", "1", "1", manifest)
	f.Add(enc)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) { _, _ = Decode([]byte(s)) })
}

func TestDescriptionAndStatusRoundTrip(t *testing.T) {
	enc, err := Record{Name: "app", Namespace: "web", Revision: 4, Status: StatusFailed,
		Description: `Upgrade "app" failed: context deadline exceeded`, Chart: "app", ChartVersion: "1", Manifest: manifest}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode([]byte(enc))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || r.Description != `Upgrade "app" failed: context deadline exceeded` || r.Revision != 4 {
		t.Errorf("release = %+v", r)
	}
}

func TestIsPending(t *testing.T) {
	for status, want := range map[string]bool{
		StatusPendingInstall: true, StatusPendingUpgrade: true, StatusPendingRollback: true,
		StatusDeployed: false, StatusFailed: false, StatusSuperseded: false, StatusUninstalling: false, "": false,
	} {
		if got := IsPending(status); got != want {
			t.Errorf("IsPending(%q) = %v, want %v", status, got, want)
		}
	}
}

func TestRecordRevision(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		want   int
		ok     bool
	}{
		{"sh.helm.release.v1.app.v3", map[string]string{"version": "3"}, 3, true},
		{"sh.helm.release.v1.app.v12", nil, 12, true},                               // no label: the name says
		{"sh.helm.release.v1.app.v12", map[string]string{"version": "x"}, 12, true}, // a bad label: the name says
		{"sh.helm.release.v1.app.v0", nil, 0, false},
		{"sh.helm.release.v1.app-2.v5", nil, 0, false}, // another release's record
		{"something-else", nil, 0, false},
	}
	for _, c := range cases {
		got, ok := RecordRevision("app", c.name, c.labels)
		if got != c.want || ok != c.ok {
			t.Errorf("RecordRevision(%q, %v) = %d, %v; want %d, %v", c.name, c.labels, got, ok, c.want, c.ok)
		}
	}
	if got := RecordName("app", 7); got != "sh.helm.release.v1.app.v7" {
		t.Errorf("RecordName = %q", got)
	}
}
