package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// ImageReady waits until an image reference resolves in an OCI registry (field report 003:
// pods pulled an image before CI finished pushing it). Nothing to watch: it asks the registry
// with capped backoff, HEAD while waiting (Docker Hub does not count HEADs against pull limits),
// then one GET whose body must be an image manifest or index.
type ImageReady struct{}

type ImagePullSecret struct {
	Namespace *string `pulumi:"namespace,optional"`
	Name      string  `pulumi:"name"`
}

func (s *ImagePullSecret) Annotate(a infer.Annotator) {
	a.Describe(&s.Namespace, "The Secret's namespace; the provider's default namespace if unset.")
	a.Describe(&s.Name, "The Secret's name.")
}

type ImageReadyArgs struct {
	Image         string           `pulumi:"image" provider:"replaceOnChanges"`
	Platform      *string          `pulumi:"platform,optional" provider:"replaceOnChanges"`
	PullSecret    *ImagePullSecret `pulumi:"pullSecret,optional" provider:"replaceOnChanges"`
	CACertificate *string          `pulumi:"caCertificate,optional" provider:"replaceOnChanges"`
	Insecure      *bool            `pulumi:"insecure,optional" provider:"replaceOnChanges"`
	GateArgs
}

type ImageReadyState struct {
	ImageReadyArgs
	Digest         string   `pulumi:"digest"`
	PlatformDigest *string  `pulumi:"platformDigest,optional"`
	Platforms      []string `pulumi:"platforms"`
	MediaType      string   `pulumi:"mediaType"`
	Pinned         string   `pulumi:"pinned"`
}

func (g *ImageReady) Annotate(a infer.Annotator) {
	a.Describe(g, "Waits until an image reference (a tag or a digest) resolves in an OCI registry to an image manifest or index "+
		"(with `platform`: one that has that platform's image), so pods never pull an image that CI has not finished pushing. "+
		"Outputs the digest to pin in a pod spec. Credentials come from a `kubernetes.io/dockerconfigjson` Secret, whose contents "+
		"never reach outputs, logs or errors.")
}

func (a *ImageReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Image, "The image reference: `registry.example.com/team/app:v1`, `127.0.0.1:5000/app@sha256:...` "+
		"(no registry: Docker Hub, no tag: `latest`).")
	an.Describe(&a.Platform, "A platform the image must have, `os/arch[/variant]` (`linux/amd64`, `linux/arm64`, `linux/arm/v7`). "+
		"An index must list it and its image must resolve; a single image's config must be for it. An index without it fails at "+
		"once: an index is pushed whole, so the tag will not gain it.")
	an.Describe(&a.PullSecret, "A `kubernetes.io/dockerconfigjson` Secret (an imagePullSecret) holding credentials for the "+
		"image's registry, read through the Kubernetes API (needs `get` on that one Secret: a Role rule with `resourceNames`). "+
		"Default: anonymous.")
	an.Describe(&a.CACertificate, "PEM CA certificate(s) to trust for the registry's TLS (in addition to the system's).")
	an.Describe(&a.Insecure, "Trust the registry without TLS proof, as Docker's `insecure-registries` does: plain HTTP is allowed and "+
		"an HTTPS certificate is not verified. Without it, plain HTTP is only used for loopback registries (`localhost`, "+
		"`127.0.0.0/8`), as Docker does; prefer `caCertificate` for a private CA.")
}

func (s *ImageReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Digest, "The digest the reference resolves to (for a multi-platform image, the index's): pin it in a pod spec.")
	a.Describe(&s.PlatformDigest, "With `platform`: the digest of that platform's image manifest (the same as `digest` for a single-platform image).")
	a.Describe(&s.Platforms, "The image's platforms, `os/arch[/variant]`: an index's entries (attestations left out), or a single image's config platform.")
	a.Describe(&s.MediaType, "The media type of the manifest the reference resolves to (an OCI or Docker image manifest or index).")
	a.Describe(&s.Pinned, "The image pinned by digest, `<repository>@<digest>`, ready for a pod spec's `image`.")
}

var (
	_ = (infer.CustomCheck[ImageReadyArgs])((*ImageReady)(nil))
	_ = (infer.CustomRead[ImageReadyArgs, ImageReadyState])((*ImageReady)(nil))
)

func (*ImageReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ImageReadyArgs], error) {
	return checkGate(ctx, req, func(args ImageReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		if isKnown(req.NewInputs, "image") {
			if _, err := parseImageRef(args.Image); err != nil {
				failures = append(failures, p.CheckFailure{Property: "image", Reason: err.Error()})
			}
		}
		if args.Platform != nil && isKnown(req.NewInputs, "platform") {
			if _, err := parsePlatform(*args.Platform); err != nil {
				failures = append(failures, p.CheckFailure{Property: "platform", Reason: err.Error()})
			}
		}
		if args.PullSecret != nil && isKnown(req.NewInputs, "pullSecret") {
			failures = append(failures, nameFailures(req.NewInputs, "pullSecret.name", args.PullSecret.Name,
				"pullSecret.namespace", args.PullSecret.Namespace)...)
		}
		if args.CACertificate != nil && isKnown(req.NewInputs, "caCertificate") {
			if !x509.NewCertPool().AppendCertsFromPEM([]byte(*args.CACertificate)) {
				failures = append(failures, p.CheckFailure{Property: "caCertificate", Reason: "no PEM certificate found"})
			}
		}
		return failures
	})
}

// parseImageRef parses an image reference as container runtimes do (Docker Hub and `latest`
// implied), with the reason in words.
func parseImageRef(s string) (name.Reference, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return nil, fmt.Errorf("%q is not an image reference such as registry.example.com/app:v1 or app@sha256:<64 hex>", s)
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image reference such as registry.example.com/app:v1 or app@sha256:<64 hex>: %v", s, err)
	}
	return ref, nil
}

// parsePlatform parses `os/arch[/variant]`.
func parsePlatform(s string) (*v1.Platform, error) {
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

func (g *ImageReady) Create(ctx context.Context, req infer.CreateRequest[ImageReadyArgs]) (infer.CreateResponse[ImageReadyState], error) {
	return createGate(ctx, req.DryRun, req.Inputs.GateArgs, ImageReadyState{ImageReadyArgs: req.Inputs}, "image", imageBuilder(req.Inputs, ""))
}

// Read checks that the digest the gate pinned still resolves (not where the tag points now):
// the outputs are a pin, and a refresh must not move it.
func (g *ImageReady) Read(ctx context.Context, req infer.ReadRequest[ImageReadyArgs, ImageReadyState]) (infer.ReadResponse[ImageReadyArgs, ImageReadyState], error) {
	return readGate(ctx, req, imageBuilder(req.Inputs, req.State.Digest))
}

func (*ImageReady) Update(_ context.Context, req infer.UpdateRequest[ImageReadyArgs, ImageReadyState]) (infer.UpdateResponse[ImageReadyState], error) {
	return updateGate(req, func(s *ImageReadyState, in ImageReadyArgs) { s.ImageReadyArgs = in })
}

func imageBuilder(a ImageReadyArgs, pinnedDigest string) builder[ImageReadyState] {
	return func(r *run) (evaluation, func(*ImageReadyState), error) {
		ref, err := parseImageRef(a.Image)
		if err != nil {
			return nil, nil, fmt.Errorf("image: %v", err)
		}
		e := &imageEval{r: r, args: a, ref: ref, base: pinnedBase(a.Image)}
		if pinnedDigest != "" {
			if e.ref, err = name.NewDigest(ref.Context().String() + "@" + pinnedDigest); err != nil {
				return nil, nil, fmt.Errorf("digest: %v", err)
			}
		}
		if a.Platform != nil {
			if e.platform, err = parsePlatform(*a.Platform); err != nil {
				return nil, nil, fmt.Errorf("platform: %v", err)
			}
		}
		if a.PullSecret != nil {
			e.secretNS, e.secretName = r.defaultNamespace(a.PullSecret.Namespace), a.PullSecret.Name
		}
		tlsCfg := &tls.Config{InsecureSkipVerify: deref(a.Insecure)} //nolint:gosec // the user's explicit choice
		if a.CACertificate != nil {
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			pool.AppendCertsFromPEM([]byte(*a.CACertificate))
			tlsCfg.RootCAs = pool
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.TLSClientConfig = tlsCfg
		base.DisableKeepAlives = true // a request every ~2 s at most: not worth idle connections outliving the gate
		e.transport = &schemeGuard{inner: base, plainOK: deref(a.Insecure)}
		return e, func(s *ImageReadyState) {
			s.Digest, s.Platforms, s.MediaType = e.digest, e.platforms, e.mediaType
			s.Pinned = e.base + "@" + e.digest
			s.PlatformDigest = nil
			if e.platform != nil {
				d := e.platformDigest
				s.PlatformDigest = &d
			}
		}, nil
	}
}

// pinnedBase is the user's reference without its tag or digest, spelled as the user spelled
// it (not expanded to index.docker.io/library/...), for `<base>@<digest>`.
func pinnedBase(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// imageBackoff caps the interval between registry requests. Nothing can be watched; a push
// lands in one manifest PUT, so up to 2 s detection is the price of each check costing up to
// three requests (ping, token, HEAD) on a registry that may be shared and rate-limited.
const imageBackoff = 2 * time.Second

// imageRequestTimeout bounds one check, so a registry that hangs is reported and retried.
const imageRequestTimeout = 15 * time.Second

type imageEval struct {
	r                    *run
	args                 ImageReadyArgs
	ref                  name.Reference
	base                 string
	platform             *v1.Platform
	secretNS, secretName string
	transport            http.RoundTripper

	digest, platformDigest, mediaType string
	platforms                         []string
}

func (e *imageEval) what() string {
	w := "image " + e.ref.String()
	if e.platform != nil {
		w += " for " + e.platform.String()
	}
	return w
}

func (e *imageEval) maxBackoff() time.Duration { return imageBackoff }

func (e *imageEval) check(ctx context.Context) wait.Result {
	ctx, cancel := context.WithTimeout(ctx, imageRequestTimeout)
	defer cancel()
	auth, pending := e.credentials(ctx)
	if pending != nil {
		return *pending
	}
	rc := registryContext{registry: e.ref.Context().RegistryStr(), repository: e.ref.Context().RepositoryStr(), reference: e.ref.String()}
	if e.secretName != "" {
		rc.creds = e.secretNS + "/" + e.secretName
	}
	rec := &challengeRecorder{inner: e.transport}
	tr, err := transport.NewWithContext(ctx, e.ref.Context().Registry, auth, rec, []string{e.ref.Scope(transport.PullScope)})
	if err != nil {
		rc.tokenPhase, rc.basic = true, rec.basic.Load()
		return rc.result(err)
	}
	rc.basic = rec.basic.Load()
	// A *transport.Wrapper: remote adds no retries of its own (the wait loop retries).
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr)}
	target := e.ref
	head, err := remote.Head(e.ref, opts...)
	var (
		terr *transport.Error
		uerr *url.Error
	)
	switch {
	case err == nil:
		// GET by the digest HEAD named: go-containerregistry then checks the body hashes to it.
		target = e.ref.Context().Digest(head.Digest.String())
	case errors.As(err, &terr) && terr.StatusCode == http.StatusMethodNotAllowed:
		// A registry without HEAD on manifests: the GET decides.
	case errors.As(err, &terr) || errors.As(err, &uerr) || ctx.Err() != nil:
		return rc.result(err)
	default:
		// HEAD answered 200 without a digest or media type (some registries, or no registry at
		// all): the GET decides.
	}
	desc, err := remote.Get(target, opts...)
	if err != nil {
		return rc.result(err)
	}
	return e.judge(desc, opts, rc)
}

// judge decides on a resolved descriptor: only an image manifest or index is proof.
func (e *imageEval) judge(desc *remote.Descriptor, opts []remote.Option, rc registryContext) wait.Result {
	mt := mediaTypeOf(desc.MediaType)
	switch {
	case mt.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return notAManifest(rc, desc, err)
		}
		im, err := idx.IndexManifest()
		if err != nil || im.SchemaVersion != 2 {
			return notAManifest(rc, desc, err)
		}
		var platforms []string
		var chosen *v1.Descriptor
		for i, m := range im.Manifests {
			if m.Platform == nil || m.Platform.OS == "unknown" || m.Platform.OS == "" {
				continue // attestations (unknown/unknown) and unlabelled entries are no platform
			}
			platforms = append(platforms, m.Platform.String())
			if e.platform != nil && chosen == nil && m.Platform.Satisfies(*e.platform) && mediaTypeOf(m.MediaType).IsImage() {
				chosen = &im.Manifests[i]
			}
		}
		sort.Strings(platforms)
		e.digest, e.mediaType, e.platforms = desc.Digest.String(), string(mt), platforms
		if e.platform == nil {
			return wait.Result{Ready: true, Message: fmt.Sprintf("%s resolves to index %s (%s)", rc.reference, e.digest, strings.Join(platforms, ", "))}
		}
		if chosen == nil {
			return wait.Result{Failed: fmt.Errorf("%s resolves to index %s, which has no %s image (it has: %s). An index is pushed whole, "+
				"so this tag will not gain that platform: build and push one that includes it (docker buildx build --platform ...), "+
				"or change platform", rc.reference, e.digest, e.platform, orNone(platforms))}
		}
		child, err := remote.Get(e.ref.Context().Digest(chosen.Digest.String()), opts...)
		if err != nil {
			res := rc.result(err)
			res.Message = fmt.Sprintf("index %s lists %s image %s, which does not resolve yet: %s", e.digest, e.platform, chosen.Digest, res.Message)
			return res
		}
		if _, res := imageConfig(child, rc); res != nil {
			return *res
		}
		e.platformDigest = child.Digest.String()
		return wait.Result{Ready: true, Message: fmt.Sprintf("%s resolves to index %s, %s image %s", rc.reference, e.digest, e.platform, e.platformDigest)}
	case mt.IsImage():
		cf, res := imageConfig(desc, rc)
		if res != nil {
			return *res
		}
		pl := cf.Platform()
		e.digest, e.mediaType, e.platforms = desc.Digest.String(), string(mt), nil
		if pl != nil && pl.OS != "" {
			e.platforms = []string{pl.String()}
		}
		if e.platform != nil {
			if pl == nil || !pl.Satisfies(*e.platform) {
				return wait.Result{Failed: fmt.Errorf("%s resolves to a single-platform image %s for %s, not %s: "+
					"push a multi-platform image (an index) or one built for %s, or change platform",
					rc.reference, e.digest, orNone(e.platforms), e.platform, e.platform)}
			}
			e.platformDigest = e.digest
		}
		return wait.Result{Ready: true, Message: fmt.Sprintf("%s resolves to image %s (%s)", rc.reference, e.digest, orNone(e.platforms))}
	}
	return notAManifest(rc, desc, nil)
}

// imageConfig reads an image's config blob: an image whose config cannot be read cannot run,
// and an artifact that is not a container image (a Helm chart, a signature) has another config.
func imageConfig(desc *remote.Descriptor, rc registryContext) (*v1.ConfigFile, *wait.Result) {
	if !mediaTypeOf(desc.MediaType).IsImage() {
		r := notAManifest(rc, desc, nil)
		return nil, &r
	}
	img, err := desc.Image()
	if err != nil {
		r := notAManifest(rc, desc, err)
		return nil, &r
	}
	m, err := img.Manifest()
	if err != nil || m.SchemaVersion != 2 || m.Config.Digest.Hex == "" {
		r := notAManifest(rc, desc, err)
		return nil, &r
	}
	if ct := mediaTypeOf(m.Config.MediaType); !ct.IsConfig() {
		return nil, &wait.Result{Failed: fmt.Errorf("%s (%s) is not a container image: its config has media type %q "+
			"(an OCI artifact such as a Helm chart or a signature), which no kubelet runs", rc.reference, desc.Digest, ct)}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		r := rc.result(err)
		r.Message = fmt.Sprintf("the config blob %s of %s cannot be read: %s", m.Config.Digest, desc.Digest, r.Message)
		return nil, &r
	}
	return cf, nil
}

// notAManifest: something answered 200 at the manifest URL with a body that is no image
// manifest or index (another HTTP server on that port, a login page). Not proof; it may be a
// proxy in front of a registry that is still starting, so the gate keeps asking.
func notAManifest(rc registryContext, desc *remote.Descriptor, err error) wait.Result {
	why := fmt.Sprintf("Content-Type %q", desc.MediaType)
	if err != nil {
		why += fmt.Sprintf(", body not parseable: %v", err)
	}
	return wait.Result{Poll: true,
		Message: fmt.Sprintf("%s answered HTTP 200 with no image manifest or index (%s)", rc.registry, why),
		Hint:    fmt.Sprintf("is %s an OCI registry? Something else answers at its manifest URL", rc.registry)}
}

func mediaTypeOf(mt types.MediaType) types.MediaType {
	if base, _, err := mime.ParseMediaType(string(mt)); err == nil {
		return types.MediaType(base)
	}
	return mt
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no platform"
	}
	return strings.Join(s, ", ")
}

// credentials reads the pull Secret each check (it may be created or rotated meanwhile) and
// keeps only the one registry's entry, for this check. A GET, not the shared watch: the watch
// cache trims Secret values by design, and credentials are values. Its contents never reach a
// message.
func (e *imageEval) credentials(ctx context.Context) (authn.Authenticator, *wait.Result) {
	if e.secretName == "" {
		return authn.Anonymous, nil
	}
	id := e.secretNS + "/" + e.secretName
	s, err := e.r.clients.Typed.CoreV1().Secrets(e.secretNS).Get(ctx, e.secretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &wait.Result{Poll: true, Message: fmt.Sprintf("pullSecret %s not found (not created yet)", id),
			Hint: "is whatever writes the pull Secret (External Secrets, a CI job) running?"}
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return nil, &wait.Result{Failed: fmt.Errorf("cannot read pullSecret %s: %v; grant verb \"get\" on that Secret "+
			"(a Role rule with resourceNames: [%s]) to the provider's user", id, err, e.secretName)}
	case err != nil:
		return nil, &wait.Result{Poll: true, Message: fmt.Sprintf("reading pullSecret %s: %v", id, err)}
	}
	cfg, err := registryAuth(s, e.ref.Context())
	if err != nil {
		return nil, &wait.Result{Failed: fmt.Errorf("pullSecret %s: %v", id, err)}
	}
	return authn.FromConfig(cfg), nil
}

// registryAuth finds repo's registry in a kubernetes.io/dockerconfigjson Secret, matching
// `auths` keys as the kubelet does: a key may carry a scheme, a port, a path prefix of the
// repository and `*` wildcards per DNS label; the longest matching path wins. Written here
// because docker/cli's config loader runs credential helpers named by the file (a Secret must
// not make the provider execute anything) and the kubelet's matcher lives in k8s.io/kubernetes.
// Errors never quote the Secret's contents.
func registryAuth(s *corev1.Secret, repo name.Repository) (authn.AuthConfig, error) {
	if s.Type != corev1.SecretTypeDockerConfigJson {
		return authn.AuthConfig{}, fmt.Errorf("has type %q, want %q (an imagePullSecret, as `kubectl create secret docker-registry` makes)",
			s.Type, corev1.SecretTypeDockerConfigJson)
	}
	raw, ok := s.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return authn.AuthConfig{}, fmt.Errorf("has no %s key", corev1.DockerConfigJsonKey)
	}
	var file struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if json.Unmarshal(raw, &file) != nil { // the decoder's error quotes the data: not shown
		return authn.AuthConfig{}, fmt.Errorf("its %s is not a JSON object with an \"auths\" map", corev1.DockerConfigJsonKey)
	}
	best, bestLen := "", -1
	for key := range file.Auths {
		if n, ok := authKeyMatches(key, repo); ok && (n > bestLen || (n == bestLen && key < best)) {
			best, bestLen = key, n
		}
	}
	if bestLen < 0 {
		return authn.AuthConfig{}, fmt.Errorf("has no credentials for registry %s (its %s lists %d other registr%s)",
			repo.RegistryStr(), corev1.DockerConfigJsonKey, len(file.Auths), map[bool]string{true: "y", false: "ies"}[len(file.Auths) == 1])
	}
	a := file.Auths[best]
	cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
	if a.Auth != "" {
		dec, err := base64.StdEncoding.DecodeString(a.Auth)
		user, pass, ok := strings.Cut(string(dec), ":")
		if err != nil || !ok {
			return authn.AuthConfig{}, fmt.Errorf("its entry for registry %s has an \"auth\" that is not base64 of user:password", repo.RegistryStr())
		}
		cfg.Username, cfg.Password = user, pass
	}
	if cfg == (authn.AuthConfig{}) {
		return authn.AuthConfig{}, fmt.Errorf("its entry for registry %s has no username, password, auth or token", repo.RegistryStr())
	}
	return cfg, nil
}

// dockerHubHosts are the names Docker Hub goes by in config files.
var dockerHubHosts = map[string]bool{"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true}

// authKeyMatches reports whether a dockerconfigjson key applies to repo, and how long its path
// prefix is (longer is more specific).
func authKeyMatches(key string, repo name.Repository) (int, bool) {
	k := strings.ToLower(key)
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	host, keyPath, _ := strings.Cut(k, "/")
	keyPath = strings.Trim(keyPath, "/")
	if keyPath == "v1" || keyPath == "v2" { // "https://index.docker.io/v1/": the API version, not a repository path
		keyPath = ""
	}
	reg := strings.ToLower(repo.RegistryStr())
	if dockerHubHosts[reg] && dockerHubHosts[host] {
		host = reg
	}
	if !hostMatches(host, reg) {
		return 0, false
	}
	if keyPath != "" {
		r := repo.RepositoryStr()
		if r != keyPath && !strings.HasPrefix(r, keyPath+"/") {
			return 0, false
		}
	}
	return len(keyPath), true
}

// hostMatches compares host[:port] patterns label by label, `*` matching one label (kubelet).
func hostMatches(pattern, host string) bool {
	ph, pp, _ := strings.Cut(pattern, ":")
	hh, hp, _ := strings.Cut(host, ":")
	if pp != hp {
		return false
	}
	pl, hl := strings.Split(ph, "."), strings.Split(hh, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := path.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}

// registryContext is what a registry error is judged against.
type registryContext struct {
	registry, repository, reference string
	creds                           string // the pull Secret, "ns/name", or "" for anonymous
	basic                           bool   // the registry asked for HTTP Basic auth (no anonymous token exists)
	tokenPhase                      bool   // the error came from the ping or the token endpoint, not the manifest
}

// result turns a registry error into a wait result: transient states wait (Poll), states that
// waiting cannot fix fail at once, saying which input to set.
func (rc registryContext) result(err error) wait.Result {
	msg, terminal, hint := rc.classify(err)
	if terminal {
		return wait.Result{Failed: errors.New(msg)}
	}
	return wait.Result{Poll: true, Message: msg, Hint: hint}
}

// classify describes a registry error and says whether it is terminal. Pure: table-tested.
func (rc registryContext) classify(err error) (msg string, terminal bool, hint string) {
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		terr      *transport.Error
		plain     *plainHTTPRefused
		dnsErr    *net.DNSError
	)
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("the TLS certificate of registry %s is signed by an unknown authority: set caCertificate to the PEM "+
			"of the CA that signed it (or insecure: true to skip verification)", rc.registry), true, ""
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the TLS certificate of registry %s is not valid for that host (%v): use the host name the certificate "+
			"names in image, or fix the certificate", rc.registry, hostErr.Error()), true, ""
	case errors.As(err, &invalid):
		return fmt.Sprintf("the TLS certificate of registry %s is invalid: %v", rc.registry, invalid.Error()), true, ""
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Sprintf("registry %s speaks plain HTTP, not HTTPS: set insecure: true to allow plain HTTP", rc.registry), true, ""
	case errors.As(err, &terr):
		return rc.classifyStatus(terr)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused by %s (the registry is not listening yet)", rc.registry), false,
			"is the registry running and listening at " + rc.registry + "?"
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve %s: %v", rc.registry, dnsErr), false, "is the registry host name right, and does it resolve from where the provider runs?"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Sprintf("%s did not answer in time: %v", rc.registry, err), false, "is the registry reachable from where the provider runs?"
	case errors.As(err, &plain):
		// Only after the transient causes: with HTTPS refused too, the registry is just down.
		return plain.Error(), true, ""
	}
	return err.Error(), false, "is " + rc.registry + " an OCI registry, reachable from where the provider runs?"
}

func (rc registryContext) classifyStatus(terr *transport.Error) (string, bool, string) {
	code := func(c transport.ErrorCode) bool {
		for _, d := range terr.Errors {
			if d.Code == c {
				return true
			}
		}
		return false
	}
	what := fmt.Sprintf("HTTP %d", terr.StatusCode)
	if len(terr.Errors) > 0 {
		what += " " + string(terr.Errors[0].Code)
		if m := terr.Errors[0].Message; m != "" {
			what += ": " + m
		}
	}
	denied := terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden ||
		code(transport.UnauthorizedErrorCode) || code(transport.DeniedErrorCode)
	switch {
	case denied && rc.creds != "":
		return fmt.Sprintf("registry %s refused the credentials from pullSecret %s for %s (%s): check that they are valid "+
			"and may pull %s", rc.registry, rc.creds, rc.repository, what, rc.repository), true, ""
	case denied && (rc.basic || rc.tokenPhase):
		return fmt.Sprintf("registry %s requires credentials (%s): set pullSecret to a kubernetes.io/dockerconfigjson Secret "+
			"with an entry for %s", rc.registry, what, rc.registry), true, ""
	case denied:
		// A token registry that gave an anonymous token but refuses the repository: Docker
		// Hub answers so for a repository that does not exist yet, which CI may be about to
		// create. Not proof, not a verdict.
		return fmt.Sprintf("registry %s refuses anonymous pulls of %s (%s): the repository does not exist yet, or it is private",
			rc.registry, rc.repository, what), false, "if the repository is private, set pullSecret"
	case code(transport.NameUnknownErrorCode):
		return fmt.Sprintf("repository %s does not exist in %s yet (%s)", rc.repository, rc.registry, what), false,
			"has CI pushed " + rc.reference + "? Is the repository name right?"
	case code(transport.ManifestUnknownErrorCode) || terr.StatusCode == http.StatusNotFound:
		return fmt.Sprintf("%s not found (%s): not pushed yet", rc.reference, what), false,
			"has CI pushed " + rc.reference + "? Is the tag right?"
	case code(transport.NameInvalidErrorCode) || code(transport.TagInvalidErrorCode):
		return fmt.Sprintf("registry %s rejects the reference %s (%s)", rc.registry, rc.reference, what), true, ""
	case terr.StatusCode == http.StatusTooManyRequests || code(transport.TooManyRequestsErrorCode):
		return fmt.Sprintf("registry %s is rate-limiting (%s)", rc.registry, what), false, "the registry's pull rate limits; set pullSecret to pull as a user"
	case terr.StatusCode >= 500:
		return fmt.Sprintf("registry %s answered %s", rc.registry, what), false, "the registry's health and logs"
	}
	return fmt.Sprintf("registry %s answered %s", rc.registry, what), false, "is " + rc.registry + " an OCI registry?"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// schemeGuard refuses plain HTTP unless insecure is set or the registry is on loopback.
// go-containerregistry falls back to HTTP for RFC 1918 addresses too; Docker does not, and a
// gate should not trust a private network more than a container runtime would.
type schemeGuard struct {
	inner   http.RoundTripper
	plainOK bool
}

type plainHTTPRefused struct{ host string }

func (e *plainHTTPRefused) Error() string {
	return fmt.Sprintf("plain HTTP to %s refused: set insecure: true if the registry does not speak HTTPS", e.host)
}

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.plainOK && !isLoopbackHost(req.URL.Hostname()) {
		return nil, &plainHTTPRefused{host: req.URL.Host}
	}
	return g.inner.RoundTrip(req)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// challengeRecorder notes whether the registry's ping asked for HTTP Basic auth: then an
// anonymous 401 is a verdict (set pullSecret), not a repository that may appear.
type challengeRecorder struct {
	inner http.RoundTripper
	basic atomic.Bool // the HTTPS and HTTP pings of a loopback registry run at once
}

func (c *challengeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && req.URL.Path == "/v2/" &&
		strings.HasPrefix(strings.ToLower(resp.Header.Get("WWW-Authenticate")), "basic") {
		c.basic.Store(true)
	}
	return resp, err
}
