package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/registry"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// ImageReady waits until an image reference resolves in an OCI registry (field report 003:
// pods pulled an image before CI finished pushing it). Nothing to watch: it asks the registry
// with capped backoff, HEAD while waiting (Docker Hub does not count HEADs against pull limits),
// then one GET whose body must be an image manifest or index.
type ImageReady struct {
	gate[ImageReadyArgs, ImageReadyState]
}

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

//go:embed descriptions/image_ready.md
var imageReadyDoc string

func (g *ImageReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(imageReadyDoc))
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
			if _, err := registry.ParseReference(args.Image); err != nil {
				if registry.HoldsCredentials(args.Image) {
					// On no property: the engine prints the value of the property a failure names.
					failures = append(failures, p.CheckFailure{Reason: "image: " + err.Error()})
				} else {
					failures = append(failures, p.CheckFailure{Property: "image", Reason: err.Error()})
				}
			}
		}
		if args.Platform != nil && isKnown(req.NewInputs, "platform") {
			if _, err := registry.ParsePlatform(*args.Platform); err != nil {
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

func (g *ImageReady) Create(ctx context.Context, req infer.CreateRequest[ImageReadyArgs]) (infer.CreateResponse[ImageReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, ImageReadyState{ImageReadyArgs: req.Inputs}, "image", imageBuilder(req.Inputs, ""))
}

// Read checks that the digest the gate pinned still resolves (not where the tag points now):
// the outputs are a pin, and a refresh must not move it.
func (g *ImageReady) Read(ctx context.Context, req infer.ReadRequest[ImageReadyArgs, ImageReadyState]) (infer.ReadResponse[ImageReadyArgs, ImageReadyState], error) {
	return readGate(ctx, req, imageBuilder(req.Inputs, req.State.Digest))
}

func imageBuilder(a ImageReadyArgs, pinnedDigest string) builder[ImageReadyState] {
	return func(r *session.Run) (evaluation, func(*ImageReadyState), error) {
		ref, err := registry.ParseReference(a.Image)
		if err != nil {
			return nil, nil, fmt.Errorf("image: %v", err)
		}
		e := &imageEval{r: r, args: a, ref: ref, base: registry.PinnedBase(a.Image)}
		if pinnedDigest != "" {
			if e.ref, err = name.NewDigest(ref.Context().String() + "@" + pinnedDigest); err != nil {
				return nil, nil, fmt.Errorf("digest: %v", err)
			}
		}
		if a.Platform != nil {
			if e.platform, err = registry.ParsePlatform(*a.Platform); err != nil {
				return nil, nil, fmt.Errorf("platform: %v", err)
			}
		}
		if a.PullSecret != nil {
			e.secretNS, e.secretName = r.DefaultNamespace(a.PullSecret.Namespace), a.PullSecret.Name
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
		e.transport = &registry.SchemeGuard{Inner: base, PlainOK: deref(a.Insecure)}
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

// imageBackoff caps the interval between registry requests. Nothing can be watched; a push
// lands in one manifest PUT, so up to 2 s detection is the price of each check costing up to
// three requests (ping, token, HEAD) on a registry that may be shared and rate-limited.
const imageBackoff = 2 * time.Second

// imageRequestTimeout bounds one check, so a registry that hangs is reported and retried.
const imageRequestTimeout = 15 * time.Second

type imageEval struct {
	r                    *session.Run
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

func (e *imageEval) check(ctx context.Context) verdict.Result {
	ctx, cancel := context.WithTimeout(ctx, imageRequestTimeout)
	defer cancel()
	auth, pending := e.credentials(ctx)
	if pending != nil {
		return *pending
	}
	rc := registry.Attempt{Registry: e.ref.Context().RegistryStr(), Repository: e.ref.Context().RepositoryStr(), Reference: e.ref.String()}
	if e.secretName != "" {
		rc.Creds = e.secretNS + "/" + e.secretName
	}
	rec := &registry.ChallengeRecorder{Inner: e.transport}
	tr, err := transport.NewWithContext(ctx, e.ref.Context().Registry, auth, rec, []string{e.ref.Scope(transport.PullScope)})
	if err != nil {
		rc.TokenPhase, rc.Basic = true, rec.Basic()
		return registryResult(rc, err)
	}
	rc.Basic = rec.Basic()
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
		return registryResult(rc, err)
	default:
		// HEAD answered 200 without a digest or media type (some registries, or no registry at
		// all): the GET decides.
	}
	desc, err := remote.Get(target, opts...)
	if err != nil {
		return registryResult(rc, err)
	}
	return e.judge(desc, opts, rc)
}

// judge decides on a resolved descriptor: only an image manifest or index is proof.
func (e *imageEval) judge(desc *remote.Descriptor, opts []remote.Option, rc registry.Attempt) verdict.Result {
	mt := registry.BaseMediaType(desc.MediaType)
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
		platforms, chosen := registry.IndexPlatforms(im, e.platform)
		e.digest, e.mediaType, e.platforms = desc.Digest.String(), string(mt), platforms
		if e.platform == nil {
			return verdict.Result{Ready: true, Message: fmt.Sprintf("%s resolves to index %s (%s)", rc.Reference, e.digest, strings.Join(platforms, ", "))}
		}
		if chosen == nil {
			return verdict.Result{Failed: fmt.Errorf("%s resolves to index %s, which has no %s image (it has: %s). An index is pushed whole, "+
				"so this tag will not gain that platform: build and push one that includes it (docker buildx build --platform ...), "+
				"or change platform", rc.Reference, e.digest, e.platform, registry.OrNone(platforms))}
		}
		child, err := remote.Get(e.ref.Context().Digest(chosen.Digest.String()), opts...)
		if err != nil {
			res := registryResult(rc, err)
			res.Message = fmt.Sprintf("index %s lists %s image %s, which does not resolve yet: %s", e.digest, e.platform, chosen.Digest, res.Message)
			return res
		}
		if _, res := imageConfig(child, rc); res != nil {
			return *res
		}
		e.platformDigest = child.Digest.String()
		return verdict.Result{Ready: true, Message: fmt.Sprintf("%s resolves to index %s, %s image %s", rc.Reference, e.digest, e.platform, e.platformDigest)}
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
				return verdict.Result{Failed: fmt.Errorf("%s resolves to a single-platform image %s for %s, not %s: "+
					"push a multi-platform image (an index) or one built for %s, or change platform",
					rc.Reference, e.digest, registry.OrNone(e.platforms), e.platform, e.platform)}
			}
			e.platformDigest = e.digest
		}
		return verdict.Result{Ready: true, Message: fmt.Sprintf("%s resolves to image %s (%s)", rc.Reference, e.digest, registry.OrNone(e.platforms))}
	}
	return notAManifest(rc, desc, nil)
}

// imageConfig reads an image's config blob: an image whose config cannot be read cannot run,
// and an artifact that is not a container image (a Helm chart, a signature) has another config.
func imageConfig(desc *remote.Descriptor, rc registry.Attempt) (*v1.ConfigFile, *verdict.Result) {
	if !registry.BaseMediaType(desc.MediaType).IsImage() {
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
	if ct := registry.BaseMediaType(m.Config.MediaType); !ct.IsConfig() {
		return nil, &verdict.Result{Failed: fmt.Errorf("%s (%s) is not a container image: its config has media type %q "+
			"(an OCI artifact such as a Helm chart or a signature), which no kubelet runs", rc.Reference, desc.Digest, ct)}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		r := registryResult(rc, err)
		r.Message = fmt.Sprintf("the config blob %s of %s cannot be read: %s", m.Config.Digest, desc.Digest, r.Message)
		return nil, &r
	}
	return cf, nil
}

// notAManifest: something answered 200 at the manifest URL with a body that is no image
// manifest or index (another HTTP server on that port, a login page). Not proof; it may be a
// proxy in front of a registry that is still starting, so the gate keeps asking.
func notAManifest(rc registry.Attempt, desc *remote.Descriptor, err error) verdict.Result {
	why := fmt.Sprintf("Content-Type %q", desc.MediaType)
	if err != nil {
		why += fmt.Sprintf(", body not parseable: %v", err)
	}
	return verdict.Result{Poll: true,
		Message: fmt.Sprintf("%s answered HTTP 200 with no image manifest or index (%s)", rc.Registry, why),
		Hint:    fmt.Sprintf("is %s an OCI registry? Something else answers at its manifest URL", rc.Registry)}
}

// registryResult turns a registry error into a wait result: transient states wait (Poll),
// states that waiting cannot fix fail at once, saying which input to set.
func registryResult(a registry.Attempt, err error) verdict.Result {
	msg, terminal, hint := a.Classify(err)
	if terminal {
		return verdict.Result{Failed: errors.New(msg)}
	}
	return verdict.Result{Poll: true, Message: msg, Hint: hint}
}

// credentials reads the pull Secret each check (it may be created or rotated meanwhile) and
// keeps only the one registry's entry, for this check. A GET, not the shared watch: the watch
// cache trims Secret values by design, and credentials are values. Its contents never reach a
// message.
func (e *imageEval) credentials(ctx context.Context) (authn.Authenticator, *verdict.Result) {
	if e.secretName == "" {
		return authn.Anonymous, nil
	}
	id := e.secretNS + "/" + e.secretName
	s, err := e.r.Clients.Typed.CoreV1().Secrets(e.secretNS).Get(ctx, e.secretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &verdict.Result{Poll: true, Message: fmt.Sprintf("pullSecret %s not found (not created yet)", id),
			Hint: "is whatever writes the pull Secret (External Secrets, a CI job) running?"}
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return nil, &verdict.Result{Failed: fmt.Errorf("cannot read pullSecret %s: %v; grant verb \"get\" on that Secret "+
			"(a Role rule with resourceNames: [%s]) to the provider's user", id, err, e.secretName)}
	case err != nil:
		return nil, &verdict.Result{Poll: true, Message: fmt.Sprintf("reading pullSecret %s: %v", id, err)}
	}
	cfg, err := registry.Auth(s, e.ref.Context())
	if err != nil {
		return nil, &verdict.Result{Failed: fmt.Errorf("pullSecret %s: %v", id, err)}
	}
	return authn.FromConfig(cfg), nil
}
