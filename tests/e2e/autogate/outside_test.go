package autogate

// Issue 47: what pulumi-kubernetes and the cluster will really do, not what the program wrote.
// A platform stack installed a webhook (here: applied outside this stack) that validates Widgets
// in one namespace only; this stack chooses that namespace with `kubernetes:namespace`, as many
// stacks do, and creates an autonamed Widget without metadata.namespace while the webhook's
// server restarts. Without autoGate, `up` fails with the webhook's error; with it, the Widget
// waits for the webhook, in the namespace pulumi-kubernetes really uses, through a readiness
// provider configured as the stack's kubernetes configuration. Near miss: a ConfigMap nothing
// intercepts is not gated.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func TestAutoGateWebhookOutsideTheStackInTheConfiguredNamespace(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	label := fmt.Sprintf("out%d", time.Now().UnixNano()%1_000_000)
	group := label + ".readiness.test"
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	apps := testenv.Namespace(t, "apps")
	hook := testenv.NewWebhook(t)
	cfg := "platform-" + label
	doc := strings.Replace(hook.Configuration(cfg, group), "  rules:",
		"  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+apps+"}}\n  rules:", 1)
	testenv.Apply(t, doc) // installed by "another stack": not in this program

	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			if gated {
				if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "90s"}); err != nil {
					return err
				}
			}
			w, err := stack.NewKube(ctx, "widget", "apiVersion: "+group+"/v1\nkind: Widget\nspec: {size: 1}")
			if err != nil {
				return err
			}
			cm, err := stack.NewKube(ctx, "settings", "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}")
			ctx.Export("widgetCreated", w.CreationTimestamp())
			ctx.Export("settingsCreated", cm.CreationTimestamp())
			return err
		}
	}
	withNamespace := func(s auto.Stack) auto.Stack {
		if err := s.SetConfig(ctx, "kubernetes:namespace", auto.ConfigValue{Value: apps}); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Without autoGate: the webhook's server is down, and the stack fails as field report 001 does.
	bare := withNamespace(stacktest.NewStack(t, env, "outsidebare", program(false)))
	_, err := stacktest.UpErr(bare)
	stacktest.RequireFailure(t, err, "failed calling webhook")
	stacktest.Destroy(t, bare)

	s := withNamespace(stacktest.NewStack(t, env, "outside", program(true)))
	// The webhook's server starts once the gate's step begins: the plan-time dry run was refused.
	res, out, started := stacktest.UpOnceGated(t, s, "readiness:index:AdmissionReady", func() { hook.Start(t) })
	if started.IsZero() {
		t.Fatal("no AdmissionReady began: the Widget was not gated while the webhook's server was down")
	}
	if created := stacktest.OutputTime(t, res, "widgetCreated"); stacktest.CreatedBefore(created, started) {
		t.Errorf("the Widget was created at %s, before the webhook served (%s)", created, started)
	}
	gates := stacktest.GatesOf(t, s)
	want := "AdmissionReady auto-admission-widgets." + group + "-" + apps + "-" + cfg
	if !slices.Contains(gates, want) || len(gates) != 1 {
		t.Errorf("gates = %v, want only %s (the ConfigMap, which nothing intercepts, has none)", gates, want)
	}
	// Through the readiness provider configured as the stack's kubernetes configuration.
	ranThrough(t, s, out, "auto-admission-", "autogate-default")
}
