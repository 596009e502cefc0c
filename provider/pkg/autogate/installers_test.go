package autogate

import "testing"

// What a registration written below an installer must wait for, with the near misses both ways.
func TestMayGate(t *testing.T) {
	const (
		vwc     = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
		mwc     = "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration"
		crd     = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
		cert    = "kubernetes:cert-manager.io/v1:Certificate"
		es      = "kubernetes:external-secrets.io/v1:ExternalSecret"
		sa      = "kubernetes:core/v1:ServiceAccount"
		deploy  = "kubernetes:apps/v1:Deployment"
		cronjob = "kubernetes:batch/v1:CronJob"
		pod     = "kubernetes:core/v1:Pod"
		cm      = "kubernetes:core/v1:ConfigMap"
		widget  = "kubernetes:example.com/v1:Widget"
		release = "kubernetes:helm.sh/v3:Release"
	)
	for _, c := range []struct {
		installer, typ string
		want           bool
	}{
		{vwc, cm, true}, {vwc, widget, true}, {mwc, pod, true}, {vwc, es, true},
		{vwc, mwc, false}, {mwc, vwc, false}, // no webhook is called for webhook configurations
		{crd, widget, true}, {crd, es, true},
		{crd, cm, false}, {crd, deploy, false}, {crd, crd, false}, // built-in kinds are served without it
		{cert, deploy, true}, {es, cronjob, true}, {sa, pod, true}, {es, pod, true},
		{es, cm, false}, {cert, es, false}, {es, es, false}, {sa, cm, false}, {cert, vwc, false}, // no pods
		{release, deploy, false}, {release, widget, false}, // only what depends on it, which registers after it
		{cm, deploy, false}, {deploy, deploy, false}, // no installer
		{"kubernetes:apiextensions.k8s.io:CustomResource", cm, true}, // a token that names no kind: any
	} {
		if got := MayGate(c.installer, c.typ); got != c.want {
			t.Errorf("MayGate(%s, %s) = %v, want %v", c.installer, c.typ, got, c.want)
		}
	}
}
