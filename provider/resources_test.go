package provider

import "github.com/readiness-io/pulumi-readiness/provider/internal/session"

// The resources the tests create, read and delete directly (the gates read them through a
// session).
var (
	vwcResource = session.VWCResource
	crdResource = session.CRDResource
)
