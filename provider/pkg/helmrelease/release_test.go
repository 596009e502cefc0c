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
