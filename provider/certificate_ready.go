package provider

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"math/big"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/issuance"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// CertificateReady waits until cert-manager has issued a Certificate and its Secret holds
// that very certificate: what a Deployment mounting the Secret needs (field report 000).
type CertificateReady struct {
	gate[CertificateReadyArgs, CertificateReadyState]
}

type CertificateReadyArgs struct {
	Name         string   `pulumi:"name" provider:"replaceOnChanges"`
	Namespace    *string  `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	MinValidity  *string  `pulumi:"minValidity,optional" provider:"replaceOnChanges"`
	RequiredKeys []string `pulumi:"requiredKeys,optional" provider:"replaceOnChanges"`
	GateArgs
}

type IssuerRef struct {
	Name  string `pulumi:"name"`
	Kind  string `pulumi:"kind"`
	Group string `pulumi:"group"`
}

type CertificateReadyState struct {
	CertificateReadyArgs
	SecretName    string    `pulumi:"secretName"`
	NotBefore     string    `pulumi:"notBefore"`
	NotAfter      string    `pulumi:"notAfter"`
	RenewalTime   string    `pulumi:"renewalTime"`
	SerialNumber  string    `pulumi:"serialNumber"`
	DNSNames      []string  `pulumi:"dnsNames"`
	IssuerRef     IssuerRef `pulumi:"issuerRef"`
	Revision      int       `pulumi:"revision"`
	CACertificate string    `pulumi:"caCertificate"`
}

//go:embed descriptions/certificate_ready.md
var certificateReadyDoc string

func (g *CertificateReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(certificateReadyDoc))
}

func (a *CertificateReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The Certificate's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
	an.Describe(&a.MinValidity, "How long the issued certificate must stay valid from now, as a Go duration (`720h`).")
	an.Describe(&a.RequiredKeys, "Secret keys that must be present and non-empty (default `tls.crt`, `tls.key`).")
}

func (i *IssuerRef) Annotate(a infer.Annotator) {
	a.Describe(&i.Name, "The issuer's name.")
	a.Describe(&i.Kind, "`Issuer` or `ClusterIssuer` (or an external issuer's kind).")
	a.Describe(&i.Group, "The issuer's API group (`cert-manager.io` unless external).")
}

func (s *CertificateReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.SecretName, "The Secret holding the issued certificate: mount or reference it.")
	a.Describe(&s.NotBefore, "The certificate's notBefore (RFC 3339).")
	a.Describe(&s.NotAfter, "The certificate's notAfter (RFC 3339).")
	a.Describe(&s.RenewalTime, "When cert-manager will renew it (RFC 3339); empty when the gate passed on the Secret before cert-manager wrote the Certificate's status.")
	a.Describe(&s.SerialNumber, "The certificate's serial number, hex.")
	a.Describe(&s.DNSNames, "The certificate's DNS names.")
	a.Describe(&s.IssuerRef, "The issuer the Certificate names.")
	a.Describe(&s.Revision, "status.revision: how many times it was issued (the issuing CertificateRequest's revision when the gate passed before cert-manager wrote it).")
	a.Describe(&s.CACertificate, "The certificates of the Secret's `ca.crt`, PEM, when present (for CA bundles). Only CERTIFICATE blocks "+
		"that parse as X.509 are kept; any other block (a private key appended by mistake) is dropped.")
}

var (
	_ = (infer.CustomCheck[CertificateReadyArgs])((*CertificateReady)(nil))
	_ = (infer.CustomRead[CertificateReadyArgs, CertificateReadyState])((*CertificateReady)(nil))
)

func (*CertificateReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[CertificateReadyArgs], error) {
	return checkGate(ctx, req, func(args CertificateReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		failures = append(failures, keyFailures(req.NewInputs, "requiredKeys", args.RequiredKeys)...)
		if args.MinValidity != nil && isKnown(req.NewInputs, "minValidity") {
			if d, err := time.ParseDuration(*args.MinValidity); err != nil || d < 0 {
				failures = append(failures, p.CheckFailure{Property: "minValidity", Reason: fmt.Sprintf("%q is not a non-negative duration such as \"720h\"", *args.MinValidity)})
			}
		}
		return failures
	})
}

func (g *CertificateReady) Create(ctx context.Context, req infer.CreateRequest[CertificateReadyArgs]) (infer.CreateResponse[CertificateReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, CertificateReadyState{CertificateReadyArgs: req.Inputs}, "certificate", certificateBuilder(req.Inputs))
}

func (g *CertificateReady) Read(ctx context.Context, req infer.ReadRequest[CertificateReadyArgs, CertificateReadyState]) (infer.ReadResponse[CertificateReadyArgs, CertificateReadyState], error) {
	return readGate(ctx, req, certificateBuilder(req.Inputs))
}

func certificateBuilder(a CertificateReadyArgs) builder[CertificateReadyState] {
	return func(r *session.Run) (evaluation, func(*CertificateReadyState), error) {
		var minValidity time.Duration
		if a.MinValidity != nil {
			var err error
			if minValidity, err = time.ParseDuration(*a.MinValidity); err != nil {
				return nil, nil, fmt.Errorf("minValidity: %v", err)
			}
		}
		keys := a.RequiredKeys
		if len(keys) == 0 {
			keys = []string{"tls.crt", "tls.key"}
		}
		e := &certificateEval{r: r, namespace: r.DefaultNamespace(a.Namespace), name: a.Name, keys: keys, minValidity: minValidity}
		return e, e.fill, nil
	}
}

var (
	certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	certRequestGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateRequest"}
)

type certificateEval struct {
	r               *session.Run
	namespace, name string
	keys            []string
	minValidity     time.Duration

	cert     *unstructured.Unstructured
	secret   *unstructured.Unstructured
	revision int64 // the issuance's, when it passed ahead of cert-manager's status (0: read status)
}

func (e *certificateEval) what() string { return fmt.Sprintf("Certificate %s/%s", e.namespace, e.name) }

func (e *certificateEval) check(context.Context) verdict.Result {
	in, unread := e.gather()
	if unread != nil {
		return issuance.Unread(*unread)
	}
	v := issuance.Decide(in)
	if v.Result.Ready {
		e.cert, e.secret, e.revision = v.Certificate, v.Secret, v.Revision
	}
	return v.Result
}

// gather reads what issuance.Decide needs, or returns the Certificate's or the Secret's read
// when it gave no answer (Decide is not called then). It stops reading where the verdict no longer depends on
// more: no Certificate, or a Secret read that failed.
func (e *certificateEval) gather() (issuance.Input, *verdict.Result) {
	in := issuance.Input{Namespace: e.namespace, Name: e.name, MinValidity: e.minValidity}
	objs, pending := e.r.Objects(session.Target{GVK: certificateGVK, Namespace: e.namespace, Name: e.name})
	if pending != nil {
		return in, pending
	}
	if len(objs) == 0 {
		return in, nil
	}
	in.Certificate = objs[0]
	secretName, _, _ := unstructured.NestedString(in.Certificate.Object, "spec", "secretName")
	// The Secret's read may be a GET (its own watch, one object): prove meanwhile the Certificate
	// judged, which a pass needs too.
	e.r.ProveAhead()
	// Watch the Secret from now on, not from Ready=True: cert-manager writes it just before the
	// condition, and a watch opened late would add a list round trip to the detection time.
	sec := &secretEval{r: e.r, namespace: e.namespace, name: secretName, required: e.keys}
	in.Secret = sec.check(context.Background())
	in.SecretObject = sec.secret
	if in.Secret.Unsynced || in.Secret.Poll {
		return in, &in.Secret // the Secret's read gave no answer yet: nothing to decide over
	}
	if in.Secret.Failed != nil {
		return in, nil
	}
	if reqs, pending := e.r.Objects(session.Target{GVK: certRequestGVK, Namespace: e.namespace, Selector: labels.Everything(), Hint: true}); pending == nil {
		in.Requests = reqs
	}
	in.Now = time.Now()
	return in, nil
}

func (e *certificateEval) fill(s *CertificateReadyState) {
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(e.cert.Object, fields...)
		return v
	}
	s.SecretName = str("spec", "secretName")
	s.NotBefore, s.NotAfter, s.RenewalTime = str("status", "notBefore"), str("status", "notAfter"), str("status", "renewalTime")
	s.IssuerRef = IssuerRef{Name: str("spec", "issuerRef", "name"), Kind: str("spec", "issuerRef", "kind"), Group: str("spec", "issuerRef", "group")}
	if s.IssuerRef.Kind == "" {
		s.IssuerRef.Kind = "Issuer"
	}
	if s.IssuerRef.Group == "" {
		s.IssuerRef.Group = "cert-manager.io"
	}
	rev, _, _ := unstructured.NestedInt64(e.cert.Object, "status", "revision")
	s.Revision = int(max(rev, e.revision))
	data, _, _ := unstructured.NestedMap(e.secret.Object, "data")
	if leaf, err := status.LeafCertificate(fmt.Sprint(data["tls.crt"])); err == nil {
		s.SerialNumber = fmt.Sprintf("%x", new(big.Int).Set(leaf.SerialNumber))
		s.DNSNames = leaf.DNSNames
		s.NotBefore = leaf.NotBefore.UTC().Format(time.RFC3339)
		s.NotAfter = leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	if s.DNSNames == nil {
		s.DNSNames = []string{}
	}
	s.CACertificate = ""
	if ca, ok := data["ca.crt"].(string); ok {
		if raw, err := base64.StdEncoding.DecodeString(ca); err == nil {
			s.CACertificate = status.PublicCertificates(raw) // public data only: every other PEM block is dropped
		}
	}
}

func (e *certificateEval) subject() (string, string) { return e.namespace, e.name }
