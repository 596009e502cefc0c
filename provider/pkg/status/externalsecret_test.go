package status

import (
	"strings"
	"testing"
)

// Hashes of ESO's hashMeta for {annotations: {force-sync: "1700000000"}, labels: {app: web}} and
// for no labels and annotations, computed by ESO's own ObjectHash code (fmt %+v of its meta
// struct, golang.org/x/crypto/sha3.Sum224 since ESO 0.17, crypto/md5 before) in a scratch program.
const (
	esoSHA3Labelled = "662a7f5d7a59bf1c982558c35fec9b5bc13bd2da0f80a2160ae3825b"
	esoMD5Labelled  = "5f7de167971254827d6672798bb5a0dd"
	esoSHA3Bare     = "f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2"
	esoMD5Bare      = "2f2c636d06132f67992c15a1daeb0a5f"
)

func TestExternalSecretSynced(t *testing.T) {
	es := func(meta, spec, status string) string {
		return "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: db, namespace: app, " + meta + "}\n" +
			"spec: {secretStoreRef: {name: vault, kind: ClusterSecretStore}" + spec + "}\nstatus: " + status
	}
	ready := func(srv string) string {
		return `{refreshTime: "2026-11-20T10:00:00Z", syncedResourceVersion: "` + srv + `", conditions: [{type: Ready, status: "True", reason: SecretSynced, message: Secret was synced}]}`
	}
	labelled := `generation: 2, labels: {app: web}, annotations: {force-sync: "1700000000"}`
	tests := map[string]struct {
		doc   string
		ready bool
		msg   string
	}{
		"Ready=False SecretSyncedError": {doc: es("generation: 1", "", `{conditions: [{type: Ready, status: "False", reason: SecretSyncedError, message: could not get secret data from provider}]}`),
			msg: "SecretSyncedError"},
		"no Ready yet": {doc: es("generation: 1", "", "{}"), msg: "no Ready condition yet"},
		"Ready=True for the current generation (sha3)":            {doc: es("generation: 1", "", ready("1-"+esoSHA3Bare)), ready: true, msg: "synced at generation 1"},
		"Ready=True for the current generation (md5, ESO < 0.17)": {doc: es("generation: 1", "", ready("1-"+esoMD5Bare)), ready: true},
		"spec changed since the sync: the old Ready=True": {doc: es("generation: 2", "", ready("1-"+esoSHA3Bare)),
			msg: "from generation 1 (syncedResourceVersion 1-"},
		"labels and annotations synced":         {doc: es(labelled, "", ready("2-"+esoSHA3Labelled)), ready: true},
		"labels and annotations synced (md5)":   {doc: es(labelled, "", ready("2-"+esoMD5Labelled)), ready: true},
		"force-sync annotation not synced yet":  {doc: es(labelled, "", ready("2-"+esoSHA3Bare)), msg: "labels or annotations changed"},
		"a hash of another shape is not judged": {doc: es(labelled, "", ready("2-abc")), ready: true},
		"Ready=True without syncedResourceVersion": {doc: es("generation: 1", "", `{conditions: [{type: Ready, status: "True"}]}`),
			msg: "syncedResourceVersion is empty"},
		"syncedResourceVersion that is not <generation>-<hash>": {doc: es("generation: 1", "", ready("x")), msg: "is not ESO's"},
		"refreshPolicy CreatedOnce never syncs changes": {doc: es("generation: 3", ", refreshPolicy: CreatedOnce", ready("1-"+esoSHA3Bare)),
			ready: true, msg: "refreshPolicy CreatedOnce"},
		"refreshInterval 0 never syncs changes": {doc: es("generation: 3", `, refreshInterval: "0"`, ready("1-"+esoSHA3Bare)),
			ready: true, msg: "refreshInterval 0"},
		"refreshPolicy OnChange with refreshInterval 0 syncs changes": {doc: es("generation: 3", `, refreshPolicy: OnChange, refreshInterval: "0s"`, ready("1-"+esoSHA3Bare)),
			msg: "from generation 1"},
		"refreshInterval 1h syncs changes": {doc: es("generation: 3", `, refreshInterval: 1h`, ready("2-"+esoSHA3Bare)), msg: "from generation 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, msg := ExternalSecretSynced(fromYAML(t, tc.doc))
			if ok != tc.ready || !strings.Contains(msg, tc.msg) {
				t.Errorf("ExternalSecretSynced = %v, %q; want %v, ~%q", ok, msg, tc.ready, tc.msg)
			}
		})
	}
}

func TestExternalSecretResourceVersion(t *testing.T) {
	es := fromYAML(t, `
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, generation: 2, labels: {app: web}, annotations: {force-sync: "1700000000"}}`)
	if got := ExternalSecretResourceVersion(es); got != "2-"+esoSHA3Labelled {
		t.Errorf("ExternalSecretResourceVersion = %s, want 2-%s", got, esoSHA3Labelled)
	}
}
