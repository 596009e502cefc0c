package provider

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/testregistry"
)

// Every test here runs a real registry (the distribution project's handlers, in memory) on
// 127.0.0.1 and pushes to it with go-containerregistry, late, while the gate waits.

func startRegistry(t *testing.T, o testregistry.Options) *testregistry.Registry {
	t.Helper()
	r, err := testregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func pushImage(t *testing.T, r *testregistry.Registry, repoTag, platform string) string {
	t.Helper()
	d, err := r.PushImage(repoTag, platform)
	if err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	return d
}

func pushIndex(t *testing.T, r *testregistry.Registry, repoTag string, platforms ...string) string {
	t.Helper()
	d, err := r.PushIndex(repoTag, platforms...)
	if err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	return d
}

func outString(t *testing.T, m property.Map, key string) string {
	t.Helper()
	v, ok := m.GetOk(key)
	if !ok || !v.IsString() {
		t.Fatalf("output %s missing or not a string: %v", key, m)
	}
	return v.AsString()
}

// mustPassAfter awaits a gate that must pass, not before pushedFrom, resolving to digest.
func mustPassAfter(t *testing.T, ch <-chan gateResult, pushedFrom time.Time, digest string) property.Map {
	t.Helper()
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	if r.at.Before(pushedFrom) {
		t.Errorf("gate returned at %s, before the push began at %s", r.at, pushedFrom)
	}
	if got := outString(t, r.resp.Properties, "digest"); got != digest {
		t.Errorf("digest = %s, pushed %s", got, digest)
	}
	return r.resp.Properties
}

// mustFailAtOnce awaits a gate whose own timeout is minutes: only a failure at once returns.
func mustFailAtOnce(t *testing.T, ch <-chan gateResult, want ...string) error {
	t.Helper()
	r := await(t, ch, 20*time.Second)
	if r.err == nil {
		t.Fatalf("gate passed: outputs %v", r.resp.Properties)
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("want a failure at once, got a timeout: %v", r.err)
	}
	for _, w := range want {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, r.err)
		}
	}
	return r.err
}

// The near misses (another repository has the tag; the repository has another tag; an image
// whose digest is not the one asked for) keep the gate waiting; the push of the exact reference
// releases it with the pushed digest. Over TLS with a CA of the test's own (caCertificate).
func TestImageReadyWaitsForLatePush(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{TLS: true})
	pushImage(t, reg, "app:v0", "linux/amd64")   // the repository exists, the tag does not
	pushImage(t, reg, "other:v1", "linux/amd64") // the tag exists in another repository
	img, err := testregistry.Image("linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	s := newServer(t)
	ca := string(reg.CAPEM)
	byTag := createAsync(t, s, "ImageReady", props("image", reg.Ref("app:v1"), "caCertificate", ca, "timeout", "60s"))
	byDigest := createAsync(t, s, "ImageReady", props("image", reg.Ref("app@"+d.String()), "caCertificate", ca, "timeout", "60s"))
	mustNotReturn(t, byTag, 1500*time.Millisecond)
	mustNotReturn(t, byDigest, 0)

	pushedFrom := time.Now()
	tagDigest := pushImage(t, reg, "app:v1", "linux/amd64")
	out := mustPassAfter(t, byTag, pushedFrom, tagDigest)
	if got := outStrings(t, out, "platforms"); len(got) != 1 || got[0] != "linux/amd64" {
		t.Errorf("platforms = %v, want [linux/amd64]", got)
	}
	if got, want := outString(t, out, "pinned"), reg.Ref("app@"+tagDigest); got != want {
		t.Errorf("pinned = %s, want %s", got, want)
	}
	if got := outString(t, out, "mediaType"); got != "application/vnd.docker.distribution.manifest.v2+json" &&
		got != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("mediaType = %s", got)
	}
	if _, ok := out.GetOk("platformDigest"); ok && !out.Get("platformDigest").IsNull() {
		t.Errorf("platformDigest set without platform: %v", out.Get("platformDigest"))
	}
	// Another image under the same repository, not the digest asked for: still waiting.
	mustNotReturn(t, byDigest, 500*time.Millisecond)
	pushedFrom = time.Now()
	if _, err := reg.Push("app:arm", img); err != nil {
		t.Fatal(err)
	}
	mustPassAfter(t, byDigest, pushedFrom, d.String())
}

// With platform, an index must list that platform and its image must resolve; outputs carry
// both digests. An index without the platform, or a single image of another platform, fails
// at once (an index is pushed whole: the tag will not gain the platform).
func TestImageReadyPlatform(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{TLS: true})
	ca := string(reg.CAPEM)
	s := newServer(t)
	gate := func(image, platform string) <-chan gateResult {
		return createAsync(t, s, "ImageReady", props("image", reg.Ref(image), "platform", platform, "caCertificate", ca, "timeout", "5m"))
	}
	pushIndex(t, reg, "app:amd64only", "linux/amd64", "linux/s390x")
	pushImage(t, reg, "app:single", "linux/amd64")
	multi := gate("app:multi", "linux/arm64")
	single := gate("app:single", "linux/amd64")
	missing := gate("app:amd64only", "linux/arm64")
	wrongSingle := gate("app:single", "linux/arm64")

	t.Run("index without the platform fails at once", func(t *testing.T) {
		mustFailAtOnce(t, missing, "no linux/arm64 image", "linux/amd64, linux/s390x", "pushed whole")
	})
	t.Run("single image of another platform fails at once", func(t *testing.T) {
		mustFailAtOnce(t, wrongSingle, "single-platform image", "for linux/amd64, not linux/arm64")
	})
	t.Run("single image of the platform passes, platformDigest = digest", func(t *testing.T) {
		r := await(t, single, 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if a, b := outString(t, r.resp.Properties, "digest"), outString(t, r.resp.Properties, "platformDigest"); a != b {
			t.Errorf("digest %s != platformDigest %s", a, b)
		}
	})
	t.Run("index pushed late", func(t *testing.T) {
		mustNotReturn(t, multi, time.Second)
		idx, err := testregistry.Index("linux/amd64", "linux/arm64/v8")
		if err != nil {
			t.Fatal(err)
		}
		im, _ := idx.IndexManifest()
		pushedFrom := time.Now()
		d, err := reg.Push("app:multi", idx)
		if err != nil {
			t.Fatal(err)
		}
		out := mustPassAfter(t, multi, pushedFrom, d)
		if got, want := outString(t, out, "platformDigest"), im.Manifests[1].Digest.String(); got != want {
			t.Errorf("platformDigest = %s, want the linux/arm64/v8 image %s", got, want)
		}
		if got := outStrings(t, out, "platforms"); strings.Join(got, ",") != "linux/amd64,linux/arm64/v8" {
			t.Errorf("platforms = %v", got)
		}
		if got := outString(t, out, "mediaType"); got != "application/vnd.oci.image.index.v1+json" {
			t.Errorf("mediaType = %s", got)
		}
	})
}

// dockerConfigSecret creates a kubernetes.io/dockerconfigjson Secret with one entry.
func dockerConfigSecret(t *testing.T, ns, name, typ, host, user, pass string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	key := ".dockerconfigjson"
	if typ != "kubernetes.io/dockerconfigjson" {
		key = "config"
	}
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
type: %s
data: {%q: %s}`, name, ns, typ, key, base64.StdEncoding.EncodeToString([]byte(cfg))))
}

func pullSecret(ns, name string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns), "name": property.New(name)}))
}

// A registry behind htpasswd auth: credentials from a dockerconfigjson Secret read through the
// API server. Anonymous, wrong credentials, a Secret of another type or without the registry
// fail at once, saying what to set and never quoting the Secret; a Secret created late and an
// image pushed late are waited for.
func TestImageReadyPullSecret(t *testing.T) {
	const user, pass, wrong = "ci-robot", "hunter2-registry-pass", "not-the-password"
	reg := startRegistry(t, testregistry.Options{TLS: true, Users: map[string]string{user: pass}})
	ns := testenv.Namespace(t, "image")
	dockerConfigSecret(t, ns, "wrong", "kubernetes.io/dockerconfigjson", reg.Host, user, wrong)
	dockerConfigSecret(t, ns, "opaque", "Opaque", reg.Host, user, pass)
	dockerConfigSecret(t, ns, "elsewhere", "kubernetes.io/dockerconfigjson", "registry.internal.example:5000", user, pass)
	pushImage(t, reg, "app:v1", "linux/amd64")
	s := newServer(t)
	ca := string(reg.CAPEM)
	gate := func(image string, kv ...any) <-chan gateResult {
		return createAsync(t, s, "ImageReady", props(append([]any{"image", reg.Ref(image), "caCertificate", ca, "timeout", "5m"}, kv...)...))
	}
	anonymous := gate("app:v1")
	wrongCreds := gate("app:v1", "pullSecret", pullSecret(ns, "wrong"))
	opaque := gate("app:v1", "pullSecret", pullSecret(ns, "opaque"))
	elsewhere := gate("app:v1", "pullSecret", pullSecret(ns, "elsewhere"))
	late := createAsync(t, s, "ImageReady", props("image", reg.Ref("app:v2"), "caCertificate", ca, "timeout", "60s",
		"pullSecret", pullSecret(ns, "late")))

	noLeak := func(t *testing.T, err error) {
		for _, secret := range []string{pass, wrong, base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)),
			base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong)), "registry.internal.example"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error quotes the Secret's contents (%q): %v", secret, err)
			}
		}
	}
	t.Run("anonymous on a registry that requires auth", func(t *testing.T) {
		mustFailAtOnce(t, anonymous, "requires credentials", "set pullSecret", reg.Host)
	})
	t.Run("wrong credentials", func(t *testing.T) {
		noLeak(t, mustFailAtOnce(t, wrongCreds, "refused the credentials from pullSecret "+ns+"/wrong", "401"))
	})
	t.Run("Secret of another type", func(t *testing.T) {
		noLeak(t, mustFailAtOnce(t, opaque, `has type "Opaque"`, "kubernetes.io/dockerconfigjson"))
	})
	t.Run("Secret without the registry", func(t *testing.T) {
		noLeak(t, mustFailAtOnce(t, elsewhere, "has no credentials for registry "+reg.Host))
	})
	t.Run("Secret created late, image pushed late", func(t *testing.T) {
		mustNotReturn(t, late, time.Second)
		dockerConfigSecret(t, ns, "late", "kubernetes.io/dockerconfigjson", "https://"+reg.Host+"/v1/", user, pass)
		mustNotReturn(t, late, time.Second) // credentials accepted, tag absent
		pushedFrom := time.Now()
		d := pushImage(t, reg, "app:v2", "linux/arm64")
		out := mustPassAfter(t, late, pushedFrom, d)
		if v := fmt.Sprint(out); strings.Contains(v, pass) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(user+":"+pass))) {
			t.Errorf("outputs quote the Secret: %s", v)
		}
	})
}

// TLS without the registry's CA fails at once, naming caCertificate; insecure skips the
// verification. A registry that is not listening yet is waited for.
func TestImageReadyTLSAndConnection(t *testing.T) {
	tlsReg := startRegistry(t, testregistry.Options{TLS: true})
	pushImage(t, tlsReg, "app:v1", "linux/amd64")
	down, err := testregistry.New(testregistry.Options{}) // plain HTTP on loopback: no insecure needed, as with Docker
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	s := newServer(t)
	unknownCA := createAsync(t, s, "ImageReady", props("image", tlsReg.Ref("app:v1"), "timeout", "5m"))
	insecure := createAsync(t, s, "ImageReady", props("image", tlsReg.Ref("app:v1"), "insecure", true, "timeout", "60s"))
	refused := createAsync(t, s, "ImageReady", props("image", down.Ref("app:v1"), "timeout", "60s"))

	t.Run("unknown authority", func(t *testing.T) {
		mustFailAtOnce(t, unknownCA, "signed by an unknown authority", "set caCertificate")
	})
	t.Run("insecure skips verification", func(t *testing.T) {
		if r := await(t, insecure, 30*time.Second); r.err != nil {
			t.Fatal(r.err)
		}
	})
	t.Run("connection refused, then the registry starts and the image is pushed", func(t *testing.T) {
		mustNotReturn(t, refused, 1500*time.Millisecond)
		if err := down.Serve(); err != nil {
			t.Fatal(err)
		}
		mustNotReturn(t, refused, time.Second) // serving, tag absent
		pushedFrom := time.Now()
		d := pushImage(t, down, "app:v1", "linux/amd64")
		mustPassAfter(t, refused, pushedFrom, d)
	})
}

// Another HTTP server on the port answering 200 to everything (a default page, a login page)
// is no registry: no manifest, so the gate times out saying what answered.
func TestImageReadyNotARegistry(t *testing.T) {
	for name, contentType := range map[string]string{
		"HTML page":                  "text/html; charset=utf-8",
		"manifest type, HTML body":   "application/vnd.oci.image.manifest.v1+json",
		"index type, JSON non-index": "application/vnd.oci.image.index.v1+json",
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", contentType)
				if strings.HasSuffix(contentType, "index.v1+json") {
					_, _ = w.Write([]byte(`{"status":"ok"}`))
					return
				}
				_, _ = w.Write([]byte("<html><body>Welcome</body></html>"))
			}))
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			r := await(t, createAsync(t, newServer(t), "ImageReady", props("image", host+"/app:v1", "timeout", "3s")), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed on a server that is no registry: %v", r.resp.Properties)
			}
			for _, w := range []string{"timed out", "no image manifest or index", "is " + host + " an OCI registry"} {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, r.err)
				}
			}
		})
	}
}

// A refresh checks the pinned digest, not where the tag points now: outputs are a pin.
func TestImageReadyRefreshKeepsThePin(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	d := pushImage(t, reg, "app:v1", "linux/amd64")
	s := newServer(t)
	inputs := props("image", reg.Ref("app:v1"), "timeout", "60s")
	r := await(t, createAsync(t, s, "ImageReady", inputs), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	pushImage(t, reg, "app:v1", "linux/amd64") // the tag moves
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("ImageReady"), Properties: r.resp.Properties, Inputs: property.NewMap(inputs)})
	if err != nil || read.ID != r.resp.ID {
		t.Fatalf("refresh: id=%q err=%v", read.ID, err)
	}
	if got := outString(t, read.Properties, "digest"); got != d {
		t.Errorf("refresh moved the pin to %s (was %s)", got, d)
	}
}

func TestImageReadyCheck(t *testing.T) {
	s := newServer(t)
	for name, tc := range map[string]struct {
		inputs map[string]property.Value
		field  string
		reason string
	}{
		"bad reference":      {props("image", "Registry.example.com/App:v1!"), "image", "is not an image reference"},
		"empty reference":    {props("image", ""), "image", "is not an image reference"},
		"bad digest":         {props("image", "app@sha256:abc"), "image", "is not an image reference"},
		"platform no arch":   {props("image", "app:v1", "platform", "linux"), "platform", "os/arch[/variant]"},
		"platform too long":  {props("image", "app:v1", "platform", "linux/arm/v7/x"), "platform", "os/arch[/variant]"},
		"bad PEM":            {props("image", "app:v1", "caCertificate", "not a PEM"), "caCertificate", "no PEM certificate"},
		"bad Secret name":    {props("image", "app:v1", "pullSecret", pullSecret("ns", "Bad_Name")), "pullSecret.name", ""},
		"bad Secret ns":      {props("image", "app:v1", "pullSecret", pullSecret("Bad_NS", "ok")), "pullSecret.namespace", ""},
		"bad shared timeout": {props("image", "app:v1", "timeout", "soon"), "timeout", "not a duration"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := s.Check(p.CheckRequest{Urn: urn("ImageReady"), Inputs: property.NewMap(tc.inputs)})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range resp.Failures {
				if f.Property == tc.field && strings.Contains(f.Reason, tc.reason) {
					return
				}
			}
			t.Errorf("no failure on %s containing %q: %v", tc.field, tc.reason, resp.Failures)
		})
	}
	resp, err := s.Check(p.CheckRequest{Urn: urn("ImageReady"), Inputs: property.NewMap(props("image", "127.0.0.1:5000/app:v1",
		"platform", "linux/arm/v7"))})
	if err != nil || len(resp.Failures) > 0 {
		t.Errorf("valid inputs refused: %v %v", resp.Failures, err)
	}
}
