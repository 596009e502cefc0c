package status

import (
	"crypto/md5" //nolint:gosec // reproduces ESO's own (non-security) hash, not for integrity
	"crypto/sha3"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ExternalSecretSynced says whether External Secrets (ESO) has synced an ExternalSecret as it
// is now. ESO's Ready condition carries no observedGeneration, so after a spec change the old
// Ready=True stays until ESO syncs again; what tells them apart is status.syncedResourceVersion,
// which ESO sets on every successful sync to "<metadata.generation>-<hash of labels and
// annotations>" (getResourceVersion in ESO's controller). Ready only when:
//
//   - Ready=True, and
//   - syncedResourceVersion's generation is metadata.generation (the current spec was synced),
//     and its hash is that of the current labels and annotations (a `force-sync` annotation
//     was synced too); the hash is recomputed as ESO does (sha3-224 since ESO 0.17, md5
//     before), and ignored when it has neither shape;
//   - except that ESO by design never syncs again after the first sync when refreshPolicy is
//     CreatedOnce, or refreshInterval is 0 under the Periodic policy: there any sync counts.
func ExternalSecretSynced(es *unstructured.Unstructured) (bool, string) {
	ok, msg := ConditionHolds(es, "Ready", "True")
	if !ok {
		return false, msg
	}
	srv, _, _ := unstructured.NestedString(es.Object, "status", "syncedResourceVersion")
	if srv == "" {
		return false, msg + ", but status.syncedResourceVersion is empty: ESO has not recorded a successful sync"
	}
	if why := neverResyncs(es); why != "" {
		return true, fmt.Sprintf("%s, synced once (syncedResourceVersion %s); ESO does not sync again after changes: %s", msg, srv, why)
	}
	genStr, hash, _ := strings.Cut(srv, "-")
	gen, err := strconv.ParseInt(genStr, 10, 64)
	if err != nil {
		return false, fmt.Sprintf("%s, but status.syncedResourceVersion %q is not ESO's <generation>-<hash>", msg, srv)
	}
	if gen != es.GetGeneration() {
		return false, fmt.Sprintf("%s is from generation %d (syncedResourceVersion %s), the ExternalSecret is at generation %d: "+
			"ESO has not synced its current spec yet", msg, gen, srv, es.GetGeneration())
	}
	if known, match := metaHashMatches(es, hash); known && !match {
		return false, fmt.Sprintf("%s for generation %d, but its labels or annotations changed since (e.g. force-sync): "+
			"ESO has not synced them yet", msg, gen)
	}
	return true, fmt.Sprintf("%s, synced at generation %d", msg, gen)
}

// neverResyncs says why ESO will not sync this ExternalSecret again after a change ("" when it will).
func neverResyncs(es *unstructured.Unstructured) string {
	policy, _, _ := unstructured.NestedString(es.Object, "spec", "refreshPolicy")
	switch policy {
	case "CreatedOnce":
		return "refreshPolicy CreatedOnce"
	case "OnChange":
		return ""
	}
	// Periodic (the default): a refreshInterval of 0 stops syncing after the first. Absent means
	// the CRD's default (1h), which syncs changes.
	ri, found, _ := unstructured.NestedString(es.Object, "spec", "refreshInterval")
	if !found {
		return ""
	}
	if d, err := time.ParseDuration(ri); err == nil && d <= 0 {
		return "refreshInterval " + ri
	}
	return ""
}

// ExternalSecretResourceVersion is the syncedResourceVersion ESO (0.17 and later) writes when it
// syncs es as it is now: what a test playing ESO writes, and what ExternalSecretSynced accepts.
func ExternalSecretResourceVersion(es *unstructured.Unstructured) string {
	return fmt.Sprintf("%d-%x", es.GetGeneration(), sha3.Sum224(esoMetaText(es)))
}

// esoMetaText is what ESO's hashMeta hashes: fmt's %+v of a struct of the labels and annotations.
func esoMetaText(es *unstructured.Unstructured) []byte {
	type meta struct {
		annotations map[string]string
		labels      map[string]string
	}
	return []byte(fmt.Sprintf("%+v", meta{annotations: es.GetAnnotations(), labels: es.GetLabels()}))
}

// metaHashMatches recomputes ESO's hash of the labels and annotations (sha3-224 since ESO 0.17,
// md5 before) and compares. known is false when hash has neither shape, so that a future format
// is not misjudged.
func metaHashMatches(es *unstructured.Unstructured, hash string) (known, match bool) {
	text := esoMetaText(es)
	switch len(hash) {
	case 56:
		return true, fmt.Sprintf("%x", sha3.Sum224(text)) == hash
	case 32:
		return true, fmt.Sprintf("%x", md5.Sum(text)) == hash //nolint:gosec
	}
	return false, false
}
