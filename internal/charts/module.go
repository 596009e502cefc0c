package charts

// Charts as their projects publish them, made from the chart source in a Go module (the same
// module, at the same tag, that the controller's image is built from: see
// internal/controlplane/images.go). Unlike Local, nothing is changed for kwok: these charts
// run for real on a real node, their webhooks behind their Services.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// ModuleChart is a chart's source in a Go module, and what the project's release tooling does
// to it when it packages the chart.
type ModuleChart struct {
	// Module is "path@version"; Dir the chart's folder in it.
	Module, Dir string
	// Version and AppVersion are written into Chart.yaml, as the release tooling stamps them
	// (the source tree carries placeholders); the images' tags default to AppVersion.
	Version, AppVersion string
	// ChartFile is the source's Chart.yaml (cert-manager keeps a Chart.template.yaml).
	ChartFile string
	// CRDDir is the module folder whose CRDs the release tooling puts in the chart as
	// templates, behind the CRDValue flag (installCRDs in both charts).
	CRDDir, CRDValue string
	// CRDRewrites are replacements applied to each CRD file (a conversion webhook's
	// placeholder Service becomes the chart's own).
	CRDRewrites []string
	// Images are the images the chart runs by default, built from the same module (through
	// the tools module that pins its dependencies) under the names the chart references.
	Images []tools.GoImage
}

// ExternalSecretsChart is External Secrets' chart 0.11.0 (field report 001's), from the
// v0.11.0 module: its CRDs from deploy/crds (the ones with the conversion webhook the
// cert-controller fills in) put in as hack/helm.generate.sh packages them, the conversion
// webhook sent to the chart's webhook Service. Its optional bitwarden-sdk-server dependency is
// dropped (not enabled by default, and not in the module).
var ExternalSecretsChart = ModuleChart{
	Module: "github.com/external-secrets/external-secrets@v0.11.0", Dir: "deploy/charts/external-secrets",
	Version: "0.11.0", AppVersion: "v0.11.0", ChartFile: "Chart.yaml",
	CRDDir: "deploy/crds", CRDValue: "installCRDs",
	CRDRewrites: []string{
		"name: kubernetes\n          namespace: default\n",
		"name: {{ include \"external-secrets.fullname\" . }}-webhook\n          namespace: {{ .Release.Namespace | quote }}\n",
	},
	// One binary for the controller, the webhook and the cert-controller (the chart's args
	// choose), as upstream's image, with the providers and generators our stacks can use (see
	// esoTrim).
	Images: []tools.GoImage{{Ref: "oci.external-secrets.io/external-secrets/external-secrets:v0.11.0",
		ModDir: toolsModule("eso"), Pkg: "github.com/external-secrets/external-secrets", Trim: esoTrim}},
}

// esoTrim registers External Secrets' in-cluster providers and generators only (fake,
// kubernetes, webhook; pulumi, field report 001's, which is one HTTP client). The other 30
// link the cloud SDKs (AWS, Azure, GCP, Yandex, Oracle, IBM...): half of the binary's 1731
// packages and most of a cold build's time (measured in docs/development.md). No stack here can
// reach a cloud; a SecretStore of a dropped provider is refused by the webhook, as any
// provider the binary does not know.
var esoTrim = &tools.ModuleTrim{Module: "github.com/external-secrets/external-secrets", Files: map[string]string{
	"pkg/provider/register/register.go": `package register

import (
	_ "github.com/external-secrets/external-secrets/pkg/provider/fake"
	_ "github.com/external-secrets/external-secrets/pkg/provider/kubernetes"
	_ "github.com/external-secrets/external-secrets/pkg/provider/pulumi"
	_ "github.com/external-secrets/external-secrets/pkg/provider/webhook"
)
`,
	"pkg/generator/register/register.go": `package register

import (
	_ "github.com/external-secrets/external-secrets/pkg/generator/fake"
	_ "github.com/external-secrets/external-secrets/pkg/generator/password"
	_ "github.com/external-secrets/external-secrets/pkg/generator/uuid"
	_ "github.com/external-secrets/external-secrets/pkg/generator/webhook"
)
`,
}}

// CertManagerChart is cert-manager's chart v1.11.5 from its module: Chart.template.yaml
// stamped, its CRDs (deploy/crds, already Helm templates) in templates/crds.yaml.
var CertManagerChart = ModuleChart{
	Module: "github.com/cert-manager/cert-manager@v1.11.5", Dir: "deploy/charts/cert-manager",
	Version: "v1.11.5", AppVersion: "v1.11.5", ChartFile: "Chart.template.yaml",
	CRDDir: "deploy/crds", CRDValue: "installCRDs",
	Images: []tools.GoImage{
		{Ref: "quay.io/jetstack/cert-manager-controller:v1.11.5", ModDir: toolsModule("certmanager"),
			Pkg: "github.com/cert-manager/cert-manager/cmd/controller", Trim: certManagerTrim},
		// The other three from the controller's trimmed copy of the module too (they link none of
		// the files it changes): a replaced module's packages are other packages to the build
		// cache, so built from the module as published they would compile again the 35 packages
		// (the API types, pkg/util, ...) they share with the controller.
		{Ref: "quay.io/jetstack/cert-manager-webhook:v1.11.5", ModDir: toolsModule("certmanager"),
			Pkg: "github.com/cert-manager/cert-manager/cmd/webhook", Trim: certManagerTrim},
		{Ref: "quay.io/jetstack/cert-manager-cainjector:v1.11.5", ModDir: toolsModule("certmanager"),
			Pkg: "github.com/cert-manager/cert-manager/cmd/cainjector", Trim: certManagerTrim},
		// The startupapicheck hook's image (cmctl): Helm runs it after install and waits until
		// the webhook answers, as upstream's default install does.
		{Ref: "quay.io/jetstack/cert-manager-ctl:v1.11.5", ModDir: toolsModule("certmanager"),
			Pkg: "github.com/cert-manager/cert-manager/cmd/ctl", Trim: certManagerTrim},
	},
}

// certManagerTrim builds cert-manager's controller without the ACME DNS-01 providers that link
// cloud SDKs (Route53, Cloud DNS, Azure DNS, Akamai, Cloudflare, DigitalOcean, ACME-DNS: 75 of
// its 1283 packages, the AWS, Google and Azure SDKs among them). Nothing here can reach an
// ACME server, let alone a cloud's DNS; the CA, self-signed and Vault issuers and the DNS-01
// webhook and RFC 2136 solvers are as upstream. A challenge for a dropped provider fails
// naming it.
var certManagerTrim = &tools.ModuleTrim{Module: "github.com/cert-manager/cert-manager", Edits: []tools.FileEdit{
	{Path: "pkg/issuer/acme/dns/dns.go", Old: `	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/acmedns"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/akamai"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/azuredns"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/clouddns"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/cloudflare"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/digitalocean"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/rfc2136"
	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/route53"
`, New: `	"github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/rfc2136"
`},
	{Path: "pkg/issuer/acme/dns/dns.go", Old: `	cloudDNS     func(project string, serviceAccount []byte, dns01Nameservers []string, ambient bool, hostedZoneName string) (*clouddns.DNSProvider, error)
	cloudFlare   func(email, apikey, apiToken string, dns01Nameservers []string, userAgent string) (*cloudflare.DNSProvider, error)
	route53      func(accessKey, secretKey, hostedZoneID, region, role string, ambient bool, dns01Nameservers []string, userAgent string) (*route53.DNSProvider, error)
	azureDNS     func(environment, clientID, clientSecret, subscriptionID, tenantID, resourceGroupName, hostedZoneName string, dns01Nameservers []string, ambient bool, managedIdentity *cmacme.AzureManagedIdentity) (*azuredns.DNSProvider, error)
	acmeDNS      func(host string, accountJson []byte, dns01Nameservers []string) (*acmedns.DNSProvider, error)
	digitalOcean func(token string, dns01Nameservers []string) (*digitalocean.DNSProvider, error)
`, New: `	cloudDNS     func(project string, serviceAccount []byte, dns01Nameservers []string, ambient bool, hostedZoneName string) (solver, error)
	cloudFlare   func(email, apikey, apiToken string, dns01Nameservers []string, userAgent string) (solver, error)
	route53      func(accessKey, secretKey, hostedZoneID, region, role string, ambient bool, dns01Nameservers []string, userAgent string) (solver, error)
	azureDNS     func(environment, clientID, clientSecret, subscriptionID, tenantID, resourceGroupName, hostedZoneName string, dns01Nameservers []string, ambient bool, managedIdentity *cmacme.AzureManagedIdentity) (solver, error)
	acmeDNS      func(host string, accountJson []byte, dns01Nameservers []string) (solver, error)
	digitalOcean func(token string, dns01Nameservers []string) (solver, error)
`},
	{Path: "pkg/issuer/acme/dns/dns.go", Old: `		impl, err = akamai.NewDNSProvider(
			providerConfig.Akamai.ServiceConsumerDomain,
			string(clientToken),
			string(clientSecret),
			string(accessToken),
			s.DNS01Nameservers)
`, New: `		_, _, _ = clientToken, clientSecret, accessToken
		impl, err = nil, leftOut("akamai")
`},
	{Path: "pkg/issuer/acme/dns/dns.go", Old: `			clouddns.NewDNSProvider,
			cloudflare.NewDNSProviderCredentials,
			route53.NewDNSProvider,
			azuredns.NewDNSProviderCredentials,
			acmedns.NewDNSProviderHostBytes,
			digitalocean.NewDNSProviderCredentials,
`, New: `			func(string, []byte, []string, bool, string) (solver, error) { return nil, leftOut("cloudDNS") },
			func(string, string, string, []string, string) (solver, error) { return nil, leftOut("cloudflare") },
			func(string, string, string, string, string, bool, []string, string) (solver, error) { return nil, leftOut("route53") },
			func(string, string, string, string, string, string, string, []string, bool, *cmacme.AzureManagedIdentity) (solver, error) {
				return nil, leftOut("azureDNS")
			},
			func(string, []byte, []string) (solver, error) { return nil, leftOut("acmeDNS") },
			func(string, []string) (solver, error) { return nil, leftOut("digitalocean") },
`},
	{Path: "pkg/issuer/acme/dns/dns.go", Old: "func (s *Solver) loadSecretData(", New: `// leftOut: the DNS-01 providers that link cloud SDKs are not in this build (pulumi-readiness'
// test image).
func leftOut(provider string) error {
	return fmt.Errorf("the DNS-01 provider %s is not in this build of cert-manager", provider)
}

func (s *Solver) loadSecretData(`},
	// cmctl with the commands the chart runs (startupapicheck's `check api`, and `version`):
	// its others (convert, create, renew, status, inspect, approve, deny, upgrade and the
	// experimental install, which embeds Helm) link 216 packages more, Helm, ORAS, containerd's
	// and Docker's clients and kubectl's converters among them. Another command fails as
	// unknown.
	{Path: "cmd/ctl/pkg/build/commands/commands.go", Old: `	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/approve"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/check"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/completion"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/convert"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/create"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/deny"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/experimental"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/inspect"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/renew"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/status"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/upgrade"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/version"
`, New: `	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/check"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/completion"
	"github.com/cert-manager/cert-manager/cmd/ctl/pkg/version"
`},
	{Path: "cmd/ctl/pkg/build/commands/commands.go", Old: `		version.NewCmdVersion,
		convert.NewCmdConvert,
		create.NewCmdCreate,
		renew.NewCmdRenew,
		status.NewCmdStatus,
		inspect.NewCmdInspect,
		approve.NewCmdApprove,
		deny.NewCmdDeny,
		check.NewCmdCheck,
		upgrade.NewCmdUpgrade,

		// Experimental features
		experimental.NewCmdExperimental,
`, New: `		version.NewCmdVersion,
		check.NewCmdCheck,
`}}}

func toolsModule(name string) string { return filepath.Join(repo.Root(), "tools", name) }

// RealNodeCharts are the real charts the real-node tests, the TypeScript ones and the demo
// install.
var RealNodeCharts = []Installable{ExternalSecretsChart, CertManagerChart, IngressNginxChart}

// Installable is a chart a real node can run: written as a local chart for a helm.sh/v3
// Release, with images made here under the names it references.
type Installable interface {
	Write(ctx context.Context, dir string) (string, error)
	// ImagesToBuild are the chart's images, built from Go modules.
	ImagesToBuild() []tools.GoImage
}

// ImagesToBuild are the images the chart runs by default.
func (m ModuleChart) ImagesToBuild() []tools.GoImage { return m.Images }

// BuildImages builds the charts' images into the tools cache, a chart at a time beside the
// others (each is mostly one long compile of its module; their downloads overlap).
func BuildImages(ctx context.Context, logf func(string, ...any), cs ...Installable) error {
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() {
			for _, img := range c.ImagesToBuild() {
				if _, err := tools.BuildImage(ctx, img, logf); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range cs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// LoadImages builds the chart's images (cached in the tools cache) and loads them into the
// real node.
func LoadImages(ctx context.Context, node *realnode.Node, c Installable, logf func(string, ...any)) error {
	for _, img := range c.ImagesToBuild() {
		tar, err := tools.BuildImage(ctx, img, logf)
		if err != nil {
			return err
		}
		if err := node.LoadImage(ctx, tar); err != nil {
			return err
		}
	}
	return nil
}

// Install loads c's images into the real node and writes c under dir; it returns the chart's
// folder, ready for a helm.sh/v3 Release.
func Install(ctx context.Context, node *realnode.Node, c Installable, dir string, logf func(string, ...any)) (string, error) {
	if err := LoadImages(ctx, node, c, logf); err != nil {
		return "", err
	}
	return c.Write(ctx, dir)
}

// LoadImages is LoadImages(ctx, node, m, logf).
func (m ModuleChart) LoadImages(ctx context.Context, node *realnode.Node, logf func(string, ...any)) error {
	return LoadImages(ctx, node, m, logf)
}

var (
	chartVersionLine = regexp.MustCompile(`(?m)^version:.*$`)
	chartAppLine     = regexp.MustCompile(`(?m)^appVersion:.*$`)
	chartDepsBlock   = regexp.MustCompile(`(?ms)^dependencies:\n(?:[ -].*?\n)*`)
)

// Write copies the chart into dir/<chart name> as its release tooling packages it, and returns
// the chart's folder (a helm.sh/v3 Release's `chart`).
func (m ModuleChart) Write(ctx context.Context, dir string) (string, error) {
	root, err := tools.ModuleDir(ctx, m.Module)
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, m.Dir)
	out := filepath.Join(dir, filepath.Base(m.Dir))
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case rel == m.ChartFile:
			rel = "Chart.yaml"
			s := chartVersionLine.ReplaceAllString(string(b), "version: "+m.Version)
			s = chartAppLine.ReplaceAllString(s, "appVersion: "+m.AppVersion)
			b = []byte(chartDepsBlock.ReplaceAllString(s, ""))
		case rel == "Chart.lock", strings.HasSuffix(rel, ".template.md"):
			return nil
		}
		return os.WriteFile(filepath.Join(out, rel), b, 0o644) // the module cache's files are read-only
	})
	if err != nil {
		return "", fmt.Errorf("copying chart %s from %s: %w", m.Dir, m.Module, err)
	}
	if m.CRDDir == "" {
		return out, nil
	}
	crds, _ := filepath.Glob(filepath.Join(root, m.CRDDir, "*.yaml"))
	sort.Strings(crds)
	if len(crds) == 0 {
		return "", fmt.Errorf("no CRDs in %s/%s", m.Module, m.CRDDir)
	}
	text := "{{- if .Values." + m.CRDValue + " }}\n"
	rw := strings.NewReplacer(m.CRDRewrites...)
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if !strings.Contains(string(b), "kind: CustomResourceDefinition") {
			continue // a kustomization.yaml beside them
		}
		text += "---\n" + rw.Replace(strings.TrimPrefix(string(b), "---\n")) + "\n"
	}
	text += "{{- end }}\n"
	if err := os.MkdirAll(filepath.Join(out, "templates"), 0o755); err != nil {
		return "", err
	}
	return out, os.WriteFile(filepath.Join(out, "templates", "crds.yaml"), []byte(text), 0o644)
}
