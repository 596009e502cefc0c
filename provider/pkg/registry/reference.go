package registry

import (
	"fmt"
	"mime"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ParseReference parses an image reference as container runtimes do (Docker Hub and `latest`
// implied), with the reason in words. A reference pasted with credentials in it
// (`https://user:password@registry/app`, `user:password@registry/app`) is refused without being
// quoted: registry credentials belong in a pull Secret, and the error reaches the engine's output.
func ParseReference(s string) (name.Reference, error) {
	const want = "is not an image reference such as registry.example.com/app:v1 or app@sha256:<64 hex>"
	if shown, ok := withoutCredentials(s); !ok {
		return nil, fmt.Errorf("%q %s: it holds what looks like credentials (a user part before an @); give the registry's "+
			"credentials in pullSecret (a kubernetes.io/dockerconfigjson Secret) instead", shown, want)
	}
	if strings.TrimSpace(s) != s || s == "" {
		return nil, fmt.Errorf("%q %s", s, want)
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%q %s: %v", s, want, err)
	}
	return ref, nil
}

// HoldsCredentials reports whether s looks like a reference pasted with credentials (a user part
// before an @ that is not a digest's): a Check must then refuse it on no property, since the
// engine prints the value of the property a failure names.
func HoldsCredentials(s string) bool {
	_, ok := withoutCredentials(s)
	return !ok
}

// digestAfterAt matches what follows the @ of a digest reference (`app@sha256:<hex>`), or of a
// try at one (`app@sha256:abc`, refused by the parser for what it is, not taken for credentials).
var digestAfterAt = regexp.MustCompile(`^(?:sha256|sha384|sha512|blake3):[^/@]*$`)

// withoutCredentials tells whether s may hold a user part (the text before an @ that is not
// followed by a digest), and how to show s without it.
func withoutCredentials(s string) (string, bool) {
	rest := s
	if _, after, ok := strings.Cut(s, "://"); ok {
		rest = after
	}
	base := rest
	if at := strings.LastIndex(base, "@"); at >= 0 && digestAfterAt.MatchString(base[at+1:]) {
		base = base[:at]
	}
	at := strings.LastIndex(base, "@")
	if at < 0 {
		return s, true
	}
	return "REDACTED@" + rest[at+1:], false
}

// ParsePlatform parses `os/arch[/variant]`.
func ParsePlatform(s string) (*v1.Platform, error) {
	parts := strings.Split(s, "/")
	bad := len(parts) < 2 || len(parts) > 3
	for _, part := range parts {
		if part == "" || strings.ContainsAny(part, " :") {
			bad = true
		}
	}
	if bad {
		return nil, fmt.Errorf("%q is not a platform such as linux/amd64 or linux/arm/v7 (os/arch[/variant])", s)
	}
	pl := &v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		pl.Variant = parts[2]
	}
	return pl, nil
}

// PinnedBase is the user's reference without its tag or digest, spelled as the user spelled
// it (not expanded to index.docker.io/library/...), for `<base>@<digest>`.
func PinnedBase(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// BaseMediaType is a media type without its parameters (`; charset=utf-8`), as registries
// sometimes send it in Content-Type.
func BaseMediaType(mt types.MediaType) types.MediaType {
	if base, _, err := mime.ParseMediaType(string(mt)); err == nil {
		return types.MediaType(base)
	}
	return mt
}

// IndexPlatforms lists an index's platforms, `os/arch[/variant]` sorted, leaving out
// attestations (`unknown/unknown`) and unlabelled entries, and, when want is set, picks the
// first image manifest for it (nil when the index has none).
func IndexPlatforms(im *v1.IndexManifest, want *v1.Platform) (platforms []string, chosen *v1.Descriptor) {
	for i, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS == "unknown" || m.Platform.OS == "" {
			continue
		}
		platforms = append(platforms, m.Platform.String())
		if want != nil && chosen == nil && m.Platform.Satisfies(*want) && BaseMediaType(m.MediaType).IsImage() {
			chosen = &im.Manifests[i]
		}
	}
	slices.Sort(platforms)
	return platforms, chosen
}

// OrNone lists platforms for a message, or says there is none.
func OrNone(platforms []string) string {
	if len(platforms) == 0 {
		return "no platform"
	}
	return strings.Join(platforms, ", ")
}
