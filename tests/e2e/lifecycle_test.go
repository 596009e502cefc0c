package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestTriggersAndClusterChanges covers what up, refresh and destroy do after the cluster
// changed under a finished stack (a Helm upgrade restarting the webhook).
func TestTriggersAndClusterChanges(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("trg%d.readiness.test", time.Now().UnixNano()%1_000_000)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	wh := testenv.NewWebhook(t)
	cfgName := "trg-" + strings.Split(group, ".")[0]

	program := func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")
		revision, timeout := cfg.Get("revision"), cfg.Get("timeout")
		if timeout == "" {
			timeout = "2m"
		}
		// The "release": the webhook registration, as a Helm chart would create it.
		release, err := stack.NewKube(ctx, "webhook-release", wh.Configuration(cfgName, group))
		if err != nil {
			return err
		}
		gate, err := readiness.NewWebhookReady(ctx, "webhook", &readiness.WebhookReadyArgs{
			ValidatingWebhookConfiguration: pulumi.String(cfgName),
			Probe: pulumi.Map{"apiVersion": pulumi.String(group + "/v1"), "kind": pulumi.String("Widget"),
				"metadata": pulumi.Map{"name": pulumi.String("probe"), "namespace": pulumi.String("default")}},
			Triggers: pulumi.Array{pulumi.String(revision)},
			Timeout:  pulumi.String(timeout),
		}, pulumi.DependsOn([]pulumi.Resource{release}))
		if err != nil {
			return err
		}
		for _, n := range []string{"a", "b"} {
			if _, err := stack.NewKube(ctx, "external-secret-"+n,
				fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: es-%s, namespace: default}", group, n),
				pulumi.DependsOn([]pulumi.Resource{gate})); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := env.Stack(ctx, "trg", "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	setRevision := func(rev string) {
		if err := s.SetConfig(ctx, "revision", auto.ConfigValue{Value: rev}); err != nil {
			t.Fatal(err)
		}
	}
	setRevision("1")
	wh.Start(t)
	if _, err := s.Up(ctx); err != nil {
		t.Fatalf("first up: %v", err)
	}

	t.Run("restarted webhook, no change: up does nothing", func(t *testing.T) {
		wh.Stop()
		wh.Start(t)
		res, err := s.Up(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ch := *res.Summary.ResourceChanges; ch["create"]+ch["replace"]+ch["update"]+ch["delete"] > 0 {
			t.Errorf("an unchanged stack changed resources: %v", ch)
		}
	})

	t.Run("timeout change updates in place without waiting", func(t *testing.T) {
		if err := s.SetConfig(ctx, "timeout", auto.ConfigValue{Value: "3m"}); err != nil {
			t.Fatal(err)
		}
		pv, err := s.Preview(ctx, optpreview.Diff())
		if err != nil {
			t.Fatal(err)
		}
		if pv.ChangeSummary["update"] != 1 || pv.ChangeSummary["replace"] != 0 {
			t.Errorf("preview of a timeout change: want one update (~) and no replacement, got %v", pv.ChangeSummary)
		}
		wh.Stop() // an in-place update must not wait for the webhook
		res, err := s.Up(ctx)
		wh.Start(t)
		if err != nil {
			t.Fatal(err)
		}
		if ch := *res.Summary.ResourceChanges; ch["update"] != 1 || ch["replace"] != 0 {
			t.Errorf("up of a timeout change: %v", ch)
		}
	})

	t.Run("changed trigger while the webhook is down waits until it serves", func(t *testing.T) {
		wh.Stop()
		setRevision("2")
		type upResult struct {
			res auto.UpResult
			err error
		}
		done := make(chan upResult, 1)
		go func() {
			res, err := s.Up(ctx)
			done <- upResult{res, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("up finished while the webhook was down: %v", r.err)
		case <-time.After(4 * time.Second):
		}
		wh.Start(t)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if ch := *r.res.Summary.ResourceChanges; ch["replace"] < 1 {
			t.Errorf("the gate was not replaced: %v", ch)
		}
	})

	t.Run("refresh shows a gate that is no longer ready; the next up waits again", func(t *testing.T) {
		wh.Stop()
		ref, err := s.Refresh(ctx, optrefresh.ProgressStreams(&strings.Builder{}))
		if err != nil {
			t.Fatal(err)
		}
		if ch := *ref.Summary.ResourceChanges; ch["delete"] < 1 {
			t.Errorf("refresh did not report the gate gone: %v", ch)
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.Up(ctx)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("up finished while the webhook was down: %v", err)
		case <-time.After(3 * time.Second):
		}
		wh.Start(t)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("destroy deletes dependents before the release and never blocks", func(t *testing.T) {
		evs := make(chan events.EngineEvent)
		var order []string
		collected := make(chan struct{})
		go func() {
			defer close(collected)
			for e := range evs {
				if e.ResOutputsEvent != nil && e.ResOutputsEvent.Metadata.Op == "delete" {
					u := e.ResOutputsEvent.Metadata.URN
					order = append(order, u[strings.LastIndex(u, "::")+2:])
				}
			}
		}()
		if _, err := s.Destroy(ctx, optdestroy.EventStreams(evs), optdestroy.Remove()); err != nil {
			t.Fatal(err)
		}
		<-collected
		pos := map[string]int{}
		for i, n := range order {
			pos[n] = i
		}
		for _, n := range []string{"external-secret-a", "external-secret-b", "webhook"} {
			if _, ok := pos[n]; !ok || pos[n] > pos["webhook-release"] {
				t.Errorf("%s was not deleted before the release: order %v", n, order)
			}
		}
	})
}
