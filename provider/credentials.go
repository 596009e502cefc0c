package provider

import (
	"context"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/httpcheck"
)

// credentialInputs names, per gate, the top-level inputs whose value may carry a credential only
// some of the time, with the pure decision that tells. Such an input cannot be `secret` in the
// schema (a URL without credentials should stay readable in a diff and in `pulumi stack
// export`), so keepCredentialsSecret marks it secret where it carries one, as pulumi-kubernetes'
// Check marks a Secret's data. Inputs that always carry one (HttpReady's `headers`) are `secret`
// in the schema instead.
var credentialInputs = map[string]map[string]func(string) bool{
	"HttpReady": {"url": httpcheck.URLCarriesCredentials},
}

// keepCredentialsSecret wraps the provider so that a credential-carrying input is secret in the
// checked inputs (what the engine keeps as the resource's inputs) and in every state the gate
// returns (Create, Read, Update): the engine encrypts both in the state file and shows
// `[secret]` in diffs. infer derives output secretness from the inputs as well; marking the
// outputs here too keeps a gate right whatever infer does with a field that mirrors an input.
func keepCredentialsSecret(prov p.Provider) p.Provider {
	check, create, read, update := prov.Check, prov.Create, prov.Read, prov.Update
	prov.Check = func(ctx context.Context, req p.CheckRequest) (p.CheckResponse, error) {
		resp, err := check(ctx, req)
		resp.Inputs = secretCredentials(string(req.Urn.Type().Name()), resp.Inputs)
		return resp, err
	}
	prov.Create = func(ctx context.Context, req p.CreateRequest) (p.CreateResponse, error) {
		resp, err := create(ctx, req)
		resp.Properties = secretCredentials(string(req.Urn.Type().Name()), resp.Properties)
		return resp, err
	}
	prov.Read = func(ctx context.Context, req p.ReadRequest) (p.ReadResponse, error) {
		resp, err := read(ctx, req)
		kind := string(req.Urn.Type().Name())
		resp.Properties, resp.Inputs = secretCredentials(kind, resp.Properties), secretCredentials(kind, resp.Inputs)
		return resp, err
	}
	prov.Update = func(ctx context.Context, req p.UpdateRequest) (p.UpdateResponse, error) {
		resp, err := update(ctx, req)
		resp.Properties = secretCredentials(string(req.Urn.Type().Name()), resp.Properties)
		return resp, err
	}
	return prov
}

// secretCredentials returns m with every credential-carrying input of the gate kind marked
// secret. An unknown value (preview) stays unknown; a secret stays secret.
func secretCredentials(kind string, m property.Map) property.Map {
	fields := credentialInputs[kind]
	if len(fields) == 0 || m.Len() == 0 {
		return m
	}
	for key, carries := range fields {
		v, ok := m.GetOk(key)
		if !ok || v.Secret() || v.IsComputed() || !v.IsString() || !carries(v.AsString()) {
			continue
		}
		m = m.Set(key, v.WithSecret(true))
	}
	return m
}
