// Package helmrelease reads Helm 3's stored release records: Secrets of type
// helm.sh/release.v1 named sh.helm.release.v1.<name>.v<revision>, whose `release` value is
// base64(gzip(JSON)). Decoded by hand rather than with Helm's library: the format is small and
// stable, and helm.sh/helm/v3 would pull a large dependency tree into the provider. Only the
// chart metadata and references to the manifest's objects are kept; values and manifests (which
// can hold Secret data) are dropped as soon as they are parsed.
package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Release is what a gate needs from a stored release.
type Release struct {
	Name, Namespace string
	Revision        int
	Status          string
	// Description is Helm's own account of the revision's status ("Install complete",
	// "Upgrade \"x\" failed: ..."): quoted when a revision failed.
	Description              string
	Chart, ChartVersion, App string
	Objects                  []ObjectRef
	// Webhooks holds the manifest's webhook configurations in full (they carry no secrets) so
	// probes can be derived from their rules.
	Webhooks []*unstructured.Unstructured
}

// ObjectRef names one object of the manifest.
type ObjectRef struct {
	APIVersion, Kind, Namespace, Name string
}

func (o ObjectRef) String() string {
	if o.Namespace != "" {
		return o.Kind + " " + o.Namespace + "/" + o.Name
	}
	return o.Kind + " " + o.Name
}

type stored struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      struct {
		Status      string `json:"status"`
		Description string `json:"description,omitempty"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		} `json:"metadata"`
	} `json:"chart"`
	Manifest string `json:"manifest"`
}

var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// Decode decodes the `release` value of a release Secret (the string after Kubernetes' own
// base64 layer is removed, i.e. Helm's base64 text).
func Decode(releaseData []byte) (*Release, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(releaseData)))
	if err != nil {
		return nil, fmt.Errorf("release record is not base64: %v", err)
	}
	if bytes.HasPrefix(raw, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("release record: %v", err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, 64<<20)); err != nil {
			return nil, fmt.Errorf("release record: %v", err)
		}
	}
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("release record is not Helm's JSON: %v", err)
	}
	r := &Release{Name: s.Name, Namespace: s.Namespace, Revision: s.Version, Status: s.Info.Status, Description: s.Info.Description,
		Chart: s.Chart.Metadata.Name, ChartVersion: s.Chart.Metadata.Version, App: s.Chart.Metadata.AppVersion}
	if err := r.parseManifest(s.Manifest); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Release) parseManifest(manifest string) error {
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return fmt.Errorf("release manifest: %v", err)
		}
		if len(m) == 0 {
			continue // only comments
		}
		u := &unstructured.Unstructured{Object: m}
		ref := ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		if ref.Kind == "" || ref.Name == "" {
			continue
		}
		r.Objects = append(r.Objects, ref)
		if ref.Kind == "ValidatingWebhookConfiguration" || ref.Kind == "MutatingWebhookConfiguration" {
			r.Webhooks = append(r.Webhooks, u)
		}
	}
	return nil
}

// Statuses of a revision, as Helm 3 writes them (helm.sh/helm/v3/pkg/release.Status).
const (
	StatusDeployed        = "deployed"
	StatusFailed          = "failed"
	StatusSuperseded      = "superseded"
	StatusUninstalled     = "uninstalled"
	StatusUninstalling    = "uninstalling"
	StatusPendingInstall  = "pending-install"
	StatusPendingUpgrade  = "pending-upgrade"
	StatusPendingRollback = "pending-rollback"
)

// IsPending reports whether Helm is still applying the revision (install, upgrade, rollback).
func IsPending(status string) bool {
	return status == StatusPendingInstall || status == StatusPendingUpgrade || status == StatusPendingRollback
}

// RecordPrefix is the name prefix of a release's records in Helm's Secret storage driver.
func RecordPrefix(release string) string { return "sh.helm.release.v1." + release + ".v" }

// RecordName is the name of a release revision's record.
func RecordName(release string, revision int) string {
	return RecordPrefix(release) + strconv.Itoa(revision)
}

// RecordRevision is the revision a record holds, from its `version` label (which Helm sets on
// every record) or else its name; false when neither says.
func RecordRevision(release, name string, labels map[string]string) (int, bool) {
	if v, err := strconv.Atoi(labels["version"]); err == nil && v > 0 {
		return v, true
	}
	if rest, ok := strings.CutPrefix(name, RecordPrefix(release)); ok {
		if v, err := strconv.Atoi(rest); err == nil && v > 0 {
			return v, true
		}
	}
	return 0, false
}

// Record is what a test writes as Helm would: Encode gives the `release` value of its Secret.
type Record struct {
	Name, Namespace                 string
	Revision                        int
	Status, Description             string
	Chart, ChartVersion, AppVersion string
	Manifest                        string
}

// Encode is Decode's inverse, for tests that write release records as Helm does.
func Encode(name, namespace string, revision int, status, chart, chartVersion, appVersion, manifest string) (string, error) {
	return Record{Name: name, Namespace: namespace, Revision: revision, Status: status, Chart: chart,
		ChartVersion: chartVersion, AppVersion: appVersion, Manifest: manifest}.Encode()
}

// Encode writes the record as Helm's Secret driver does: base64(gzip(JSON)).
func (r Record) Encode() (string, error) {
	var s stored
	s.Name, s.Namespace, s.Version, s.Manifest = r.Name, r.Namespace, r.Revision, r.Manifest
	s.Info.Status, s.Info.Description = r.Status, r.Description
	s.Chart.Metadata.Name, s.Chart.Metadata.Version, s.Chart.Metadata.AppVersion = r.Chart, r.ChartVersion, r.AppVersion
	j, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(j); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
