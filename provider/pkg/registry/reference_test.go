package registry

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestParseReference(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                             "index.docker.io/library/nginx:latest",
		"127.0.0.1:5000/app:v1":             "127.0.0.1:5000/app:v1",
		"reg.io/team/app@sha256:" + hex64:   "reg.io/team/app@sha256:" + hex64,
		"localhost:5001/deep/path/app:2026": "localhost:5001/deep/path/app:2026",
		// Near misses: refused, never guessed into something else.
		"":                             "",
		" nginx":                       "",
		"nginx ":                       "",
		"Registry.example.com/App:v1!": "",
		"app@sha256:abc":               "",
		"app:":                         "",
	} {
		ref, err := ParseReference(in)
		switch {
		case want == "" && (err == nil || !strings.Contains(err.Error(), "is not an image reference")):
			t.Errorf("ParseReference(%q) = %v, %v; want an error", in, ref, err)
		case want != "" && (err != nil || ref.Name() != want):
			t.Errorf("ParseReference(%q) = %v, %v; want %s", in, ref, err, want)
		}
	}
}

// A reference pasted with credentials is refused, and the refusal never quotes them: it
// reaches the engine's output as a check failure.
func TestParseReferenceWithCredentials(t *testing.T) {
	for _, in := range []string{
		"admin:hunter2@registry.example.com/app:v1",
		"https://admin:hunter2@registry.example.com/app:v1",
		"hunter2@127.0.0.1:5000/app",
		"admin:hunter2@reg.io/app@sha256:" + hex64,
	} {
		_, err := ParseReference(in)
		if err == nil || !strings.Contains(err.Error(), "pullSecret") {
			t.Errorf("ParseReference(%q) = %v; want a refusal pointing at pullSecret", in, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseReference(%q): the error quotes the credential: %v", in, err)
		}
	}
	// Near misses: an @ that is a digest's is no credential.
	for _, in := range []string{"reg.io/app@sha256:" + hex64, "app@sha256:abc", "admin:pw@sha256:" + hex64 /* a tag and a digest */} {
		if _, err := ParseReference(in); err != nil && strings.Contains(err.Error(), "credentials") {
			t.Errorf("ParseReference(%q) took a digest for credentials: %v", in, err)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]*v1.Platform{
		"linux/amd64":   {OS: "linux", Architecture: "amd64"},
		"linux/arm/v7":  {OS: "linux", Architecture: "arm", Variant: "v7"},
		"windows/amd64": {OS: "windows", Architecture: "amd64"},
		// Near misses.
		"linux":          nil,
		"linux/":         nil,
		"/amd64":         nil,
		"linux/arm/v7/x": nil,
		"linux/amd 64":   nil,
		"linux:amd64/x":  nil,
		"":               nil,
	} {
		got, err := ParsePlatform(in)
		switch {
		case want == nil && (err == nil || !strings.Contains(err.Error(), "os/arch[/variant]")):
			t.Errorf("ParsePlatform(%q) = %v, %v; want an error", in, got, err)
		case want != nil && (err != nil || !reflect.DeepEqual(got, want)):
			t.Errorf("ParsePlatform(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestHostMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"reg.io", "reg.io", true},
		{"*.example.com", "reg.example.com", true},
		{"reg.*.com", "reg.example.com", true},
		{"reg.io:5000", "reg.io:5000", true},
		// Near misses: a wildcard is one label, and the port must match exactly.
		{"*.io", "a.reg.io", false},
		{"*.example.com", "example.com", false},
		{"reg.io:5000", "reg.io", false},
		{"reg.io", "reg.io:5000", false},
		{"reg.io", "reg.iox", false},
	} {
		if got := hostMatches(tc.pattern, tc.host); got != tc.want {
			t.Errorf("hostMatches(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
		}
	}
}

func TestIndexPlatforms(t *testing.T) {
	entry := func(os, arch, variant string, mt types.MediaType) v1.Descriptor {
		d := v1.Descriptor{MediaType: mt, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(os[:1], 64)}}
		if os != "" {
			d.Platform = &v1.Platform{OS: os, Architecture: arch, Variant: variant}
		}
		return d
	}
	amd := entry("linux", "amd64", "", types.OCIManifestSchema1)
	arm := entry("linux", "arm", "v7", types.DockerManifestSchema2)
	att := entry("unknown", "unknown", "", types.OCIManifestSchema1)
	nested := entry("windows", "amd64", "", types.OCIImageIndex) // an index is not an image: never chosen
	unlabelled := v1.Descriptor{MediaType: types.OCIManifestSchema1}
	idx := &v1.IndexManifest{SchemaVersion: 2, Manifests: []v1.Descriptor{arm, att, amd, unlabelled, nested}}
	for name, tc := range map[string]struct {
		want   *v1.Platform
		chosen *v1.Descriptor
	}{
		"no platform asked":  {nil, nil},
		"amd64":              {&v1.Platform{OS: "linux", Architecture: "amd64"}, &idx.Manifests[2]},
		"arm/v7":             {&v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, &idx.Manifests[0]},
		"arm64 not there":    {&v1.Platform{OS: "linux", Architecture: "arm64"}, nil},
		"attestation":        {&v1.Platform{OS: "unknown", Architecture: "unknown"}, nil},
		"nested index":       {&v1.Platform{OS: "windows", Architecture: "amd64"}, nil},
		"variant must match": {&v1.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			platforms, chosen := IndexPlatforms(idx, tc.want)
			if want := []string{"linux/amd64", "linux/arm/v7", "windows/amd64"}; !reflect.DeepEqual(platforms, want) {
				t.Errorf("platforms = %v, want %v", platforms, want)
			}
			if chosen != tc.chosen {
				t.Errorf("chosen = %v, want %v", chosen, tc.chosen)
			}
		})
	}
	if platforms, chosen := IndexPlatforms(&v1.IndexManifest{}, nil); platforms != nil || chosen != nil || OrNone(platforms) != "no platform" {
		t.Errorf("empty index: %v %v", platforms, chosen)
	}
}

func TestBaseMediaType(t *testing.T) {
	for in, want := range map[types.MediaType]types.MediaType{
		types.OCIManifestSchema1:                                     types.OCIManifestSchema1,
		types.OCIImageIndex + "; charset=utf-8":                      types.OCIImageIndex,
		"application/vnd.docker.distribution.manifest.v2+json ; x=y": types.DockerManifestSchema2,
		"text/html; charset=utf-8":                                   "text/html",
		"not a media type;;":                                         "not a media type;;",
	} {
		if got := BaseMediaType(in); got != want {
			t.Errorf("BaseMediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

// A 401 with a Basic challenge on the ping is remembered; a Bearer challenge, or a Basic one on
// another path, is not.
func TestChallengeRecorder(t *testing.T) {
	for _, tc := range []struct {
		path, challenge string
		code            int
		want            bool
	}{
		{"/v2/", `Basic realm="registry"`, 401, true},
		{"/v2/", `basic realm="registry"`, 401, true},
		{"/v2/", `Bearer realm="https://auth.example/token"`, 401, false},
		{"/v2/app/manifests/v1", `Basic realm="registry"`, 401, false},
		{"/v2/", `Basic realm="registry"`, 200, false},
	} {
		inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("WWW-Authenticate", tc.challenge)
			return &http.Response{StatusCode: tc.code, Header: h, Body: http.NoBody, Request: r}, nil
		})
		rec := &ChallengeRecorder{Inner: inner}
		req, _ := http.NewRequest(http.MethodGet, "https://reg.example"+tc.path, nil)
		if _, err := rec.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if rec.Basic() != tc.want {
			t.Errorf("%s %d %q: Basic() = %v, want %v", tc.path, tc.code, tc.challenge, rec.Basic(), tc.want)
		}
	}
}
