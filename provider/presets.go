package provider

import (
	_ "embed"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Presets are component resources whose children are the gates above, so `pulumi up` shows
// each step of "this install is usable" as its own row.

// childCrdReady and friends receive the outputs of child gates registered by token.
type childCrdReady struct {
	pulumi.CustomResourceState
	ServedVersions pulumi.StringArrayOutput `pulumi:"servedVersions"`
}

type childGate struct {
	pulumi.CustomResourceState
}

// presetWaits are how every step of a preset waits, passed to each child gate. The fields are
// repeated in each preset's arguments: infer does not decode an embedded struct of a component's
// arguments (its fields arrive empty), unlike a custom resource's.
type presetWaits struct{ Timeout, StableFor, FailureGrace *string }

func describeWaits(an infer.Annotator, timeout, stableFor, failureGrace **string) {
	an.Describe(timeout, "How long each step may wait (default `10m`).")
	an.Describe(stableFor, "Each step's `stableFor`: how long its proof must hold without interruption (default off).")
	an.Describe(failureGrace, "Each step's `failureGrace`: how long a terminal state must persist before the step fails (default off).")
}

// child is a child gate's inputs with the preset's wait settings added.
func (a presetWaits) child(inputs pulumi.Map) pulumi.Map {
	inputs["timeout"] = pulumi.String(derefOr(a.Timeout, DefaultTimeout.String()))
	if a.StableFor != nil {
		inputs["stableFor"] = pulumi.String(*a.StableFor)
	}
	if a.FailureGrace != nil {
		inputs["failureGrace"] = pulumi.String(*a.FailureGrace)
	}
	return inputs
}

// CertManagerReadyArgs are the inputs of CertManagerReady.
type CertManagerReadyArgs struct {
	Namespace            *string `pulumi:"namespace,optional"`
	WebhookConfiguration *string `pulumi:"webhookConfiguration,optional"`
	Timeout              *string `pulumi:"timeout,optional"`
	StableFor            *string `pulumi:"stableFor,optional"`
	FailureGrace         *string `pulumi:"failureGrace,optional"`
}

func (a *CertManagerReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Namespace, "cert-manager's namespace (default `cert-manager`); the webhook probe's Issuer is dry-run created there.")
	an.Describe(&a.WebhookConfiguration, "The name of cert-manager's validating and mutating webhook configurations (default `cert-manager-webhook`).")
	describeWaits(an, &a.Timeout, &a.StableFor, &a.FailureGrace)
}

// CertManagerReady is "cert-manager is usable": CRDs Established, its webhooks serving (a
// dry-run Issuer, as `cmctl check api` does) and their CA bundles injected.
type CertManagerReady struct {
	pulumi.ResourceState
	ServedVersions        pulumi.StringArrayOutput `pulumi:"servedVersions"`
	WebhookConfigurations pulumi.StringArrayOutput `pulumi:"webhookConfigurations"`
}

//go:embed descriptions/cert_manager_ready.md
var certManagerReadyDoc string

func (c *CertManagerReady) Annotate(a infer.Annotator) {
	a.Describe(c, markdown(certManagerReadyDoc))
	a.Describe(&c.ServedVersions, "The group/versions cert-manager's CRDs serve.")
	a.Describe(&c.WebhookConfigurations, "The webhook configurations that were checked, as Kind/name.")
}

var certManagerCRDs = []string{"certificates.cert-manager.io", "certificaterequests.cert-manager.io", "issuers.cert-manager.io",
	"clusterissuers.cert-manager.io", "orders.acme.cert-manager.io", "challenges.acme.cert-manager.io"}

// NewCertManagerReady constructs the component (called by the engine through Construct).
func NewCertManagerReady(ctx *pulumi.Context, name string, args CertManagerReadyArgs, opts ...pulumi.ResourceOption) (*CertManagerReady, error) {
	comp := &CertManagerReady{}
	if err := ctx.RegisterComponentResource("readiness:index:CertManagerReady", name, comp, opts...); err != nil {
		return nil, err
	}
	waits := presetWaits{args.Timeout, args.StableFor, args.FailureGrace}
	ns := derefOr(args.Namespace, "cert-manager")
	cfg := derefOr(args.WebhookConfiguration, "cert-manager-webhook")
	crds := &childCrdReady{}
	if err := ctx.RegisterResource("readiness:index:CrdReady", name+"-crds", waits.child(pulumi.Map{
		"names": pulumi.ToStringArray(certManagerCRDs)}), crds, pulumi.Parent(comp)); err != nil {
		return nil, err
	}
	meta := pulumi.Map{"generateName": pulumi.String("readiness-probe-"), "namespace": pulumi.String(ns)}
	// One probe per configuration, one its webhook intercepts: the validating webhook takes every
	// cert-manager.io kind, the mutating one only CertificateRequests (an Issuer would be admitted
	// without ever reaching it). The request is not a CSR: the validating webhook denies it, after
	// the mutating one answered.
	probes := map[string]pulumi.Map{
		"validating": {"apiVersion": pulumi.String("cert-manager.io/v1"), "kind": pulumi.String("Issuer"), "metadata": meta,
			"spec": pulumi.Map{"selfSigned": pulumi.Map{}}},
		"mutating": {"apiVersion": pulumi.String("cert-manager.io/v1"), "kind": pulumi.String("CertificateRequest"), "metadata": meta,
			"spec": pulumi.Map{"request": pulumi.String("cmVhZGluZXNzLXByb2Jl"), "issuerRef": pulumi.Map{"name": pulumi.String("readiness-probe")}}},
	}
	for _, kind := range []string{"validating", "mutating"} {
		if err := ctx.RegisterResource("readiness:index:WebhookReady", name+"-"+kind+"-webhook", waits.child(pulumi.Map{
			kind + "WebhookConfiguration": pulumi.String(cfg), "probe": probes[kind],
		}), &childGate{}, pulumi.Parent(comp), pulumi.DependsOn([]pulumi.Resource{crds})); err != nil {
			return nil, err
		}
	}
	comp.ServedVersions = crds.ServedVersions
	comp.WebhookConfigurations = pulumi.ToStringArray([]string{"ValidatingWebhookConfiguration/" + cfg, "MutatingWebhookConfiguration/" + cfg}).ToStringArrayOutput()
	return comp, nil
}

// ExternalSecretsReadyArgs are the inputs of ExternalSecretsReady.
type ExternalSecretsReadyArgs struct {
	Namespace            *string `pulumi:"namespace,optional"`
	ControllerDeployment *string `pulumi:"controllerDeployment,optional"`
	ProbeAPIVersion      *string `pulumi:"probeApiVersion,optional"`
	Timeout              *string `pulumi:"timeout,optional"`
	StableFor            *string `pulumi:"stableFor,optional"`
	FailureGrace         *string `pulumi:"failureGrace,optional"`
}

func (a *ExternalSecretsReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Namespace, "External Secrets' namespace (default `external-secrets`).")
	an.Describe(&a.ControllerDeployment, "The controller Deployment's name (default `external-secrets`).")
	an.Describe(&a.ProbeAPIVersion, "The apiVersion of the dry-run ExternalSecret and SecretStore probes: `external-secrets.io/v1` "+
		"(ESO ≥ 0.16) or `external-secrets.io/v1beta1` (default, served by older and current releases).")
	describeWaits(an, &a.Timeout, &a.StableFor, &a.FailureGrace)
}

// ExternalSecretsReady is "External Secrets is usable": CRDs, webhooks serving, controller running.
type ExternalSecretsReady struct {
	pulumi.ResourceState
	ServedVersions        pulumi.StringArrayOutput `pulumi:"servedVersions"`
	WebhookConfigurations pulumi.StringArrayOutput `pulumi:"webhookConfigurations"`
}

//go:embed descriptions/external_secrets_ready.md
var externalSecretsReadyDoc string

func (c *ExternalSecretsReady) Annotate(a infer.Annotator) {
	a.Describe(c, markdown(externalSecretsReadyDoc))
	a.Describe(&c.ServedVersions, "The group/versions External Secrets' CRDs serve.")
	a.Describe(&c.WebhookConfigurations, "The webhook configurations that were checked.")
}

var externalSecretsCRDs = []string{"externalsecrets.external-secrets.io", "secretstores.external-secrets.io",
	"clustersecretstores.external-secrets.io"}

// NewExternalSecretsReady constructs the component.
func NewExternalSecretsReady(ctx *pulumi.Context, name string, args ExternalSecretsReadyArgs, opts ...pulumi.ResourceOption) (*ExternalSecretsReady, error) {
	comp := &ExternalSecretsReady{}
	if err := ctx.RegisterComponentResource("readiness:index:ExternalSecretsReady", name, comp, opts...); err != nil {
		return nil, err
	}
	waits := presetWaits{args.Timeout, args.StableFor, args.FailureGrace}
	ns := derefOr(args.Namespace, "external-secrets")
	apiVersion := derefOr(args.ProbeAPIVersion, "external-secrets.io/v1beta1")
	crds := &childCrdReady{}
	if err := ctx.RegisterResource("readiness:index:CrdReady", name+"-crds", waits.child(pulumi.Map{
		// External Secrets before v1 converts v1alpha1 with a webhook at /convert of the same server the
		// WebhookReady children probe below; a minimal v1alpha1 object would be denied by its validating
		// webhooks (no proof): those children's probes are this component's proof.
		"names": pulumi.ToStringArray(externalSecretsCRDs), "conversion": pulumi.Bool(false)}), crds, pulumi.Parent(comp)); err != nil {
		return nil, err
	}
	meta := pulumi.Map{"generateName": pulumi.String("readiness-probe-"), "namespace": pulumi.String(ns)}
	store := pulumi.Map{"name": pulumi.String("readiness-probe"), "kind": pulumi.String("SecretStore")}
	probes := map[string]pulumi.Map{
		"externalsecret-validate": {"apiVersion": pulumi.String(apiVersion), "kind": pulumi.String("ExternalSecret"), "metadata": meta,
			"spec": pulumi.Map{"secretStoreRef": store, "target": pulumi.Map{"name": pulumi.String("readiness-probe")}}},
		"secretstore-validate": {"apiVersion": pulumi.String(apiVersion), "kind": pulumi.String("SecretStore"), "metadata": meta,
			"spec": pulumi.Map{"provider": pulumi.Map{"fake": pulumi.Map{"data": pulumi.Array{}}}}},
	}
	names := []string{"externalsecret-validate", "secretstore-validate"}
	for _, cfg := range names {
		if err := ctx.RegisterResource("readiness:index:WebhookReady", name+"-"+cfg, waits.child(pulumi.Map{
			"validatingWebhookConfiguration": pulumi.String(cfg), "probe": probes[cfg],
		}), &childGate{}, pulumi.Parent(comp), pulumi.DependsOn([]pulumi.Resource{crds})); err != nil {
			return nil, err
		}
	}
	if err := ctx.RegisterResource("readiness:index:RolloutReady", name+"-controller", waits.child(pulumi.Map{
		"kind": pulumi.String("Deployment"), "name": pulumi.String(derefOr(args.ControllerDeployment, "external-secrets")),
		"namespace": pulumi.String(ns),
	}), &childGate{}, pulumi.Parent(comp)); err != nil {
		return nil, err
	}
	comp.ServedVersions = crds.ServedVersions
	comp.WebhookConfigurations = pulumi.ToStringArray(names).ToStringArrayOutput()
	return comp, nil
}
