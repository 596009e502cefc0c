package autogate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestRetryAfterAWebhookWentAwayAfterItsGate: a webhook that answered the gate in front of a
// custom resource goes away right after the gate passed, before the create (a webhook pod
// killed); the create fails calling it and, through the program's error hook, is tried again once
// the object's admission is proven again, on the real plugin. The same for a program that
// places its gate by hand and calls AutoRetry. Near misses:
//   - the webhook denies the object after its gate passed: never retried, the denial fails `up`;
//   - a failurePolicy Ignore mutating webhook (an injector) that comes back later than the
//     failing validating one: the retry waits for it, so the object is created with its mutation.
//
// And the API server itself stopped right after the gate passed and started again a second
// later: the create meets its closed port and is retried once the API server answers again and
// admits the object (the proof on connections of its own, kube.Clients.Fresh).
func TestRetryAfterAWebhookWentAwayAfterItsGate(t *testing.T) {
	env := stacktest.Prepare(t)
	const ns, group = "ag-retry", "retry.autogate.test"
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	testenv.Apply(t, testenv.CRD(group, "Gizmo", "gizmos"))
	testenv.CRDCachesReady(t, group)
	gizmos := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}).Namespace(ns)

	type run struct {
		name      string
		hand      bool   // the gate placed by hand, AutoRetry instead of autoGate
		injector  bool   // an Ignore mutating webhook too, back 3 s after the validating one
		deny      bool   // the fault is a denial, not an outage
		apiServer bool   // the fault is the API server restarting
		wantError string // "" for a successful up
	}
	for _, r := range []run{
		{name: "autogate"},
		{name: "hand-gate", hand: true},
		{name: "injector-back-late", injector: true},
		{name: "denial", deny: true, wantError: "spec.secretStoreRef is required"},
		{name: "apiserver-restarted", apiServer: true},
	} {
		t.Run(r.name, func(t *testing.T) {
			vhook := testenv.NewWebhook(t)
			vhook.Mode.Store("allow")
			vhook.Start(t)
			mhook := testenv.NewWebhook(t)
			mhook.Mode.Store("patch")
			mhook.Start(t)
			cfg := "retry-" + r.name
			gizmo := "apiVersion: " + group + "/v1\nkind: Gizmo\nmetadata: {name: " + r.name + ", namespace: " + ns + "}\nspec: {size: 1}"
			var restarted atomic.Int64 // unix nanos when the last webhook (or the API server) came back
			apiServerBack := make(chan struct{})
			if !r.apiServer {
				close(apiServerBack)
			}
			fault := func() {
				switch {
				case r.apiServer:
					testenv.CP.StopProcess("kube-apiserver")
					go func() {
						defer close(apiServerBack)
						time.Sleep(time.Second)
						// From its start, not its /readyz: the retry may come before that.
						restarted.Store(time.Now().UnixNano())
						if err := testenv.CP.StartAPIServer(context.Background()); err != nil {
							t.Errorf("starting the API server again: %v", err)
						}
					}()
				case r.deny:
					vhook.Mode.Store("deny")
				default:
					vhook.Stop()
					if r.injector {
						mhook.Stop()
					}
					go func() {
						time.Sleep(time.Second)
						vhook.Start(t)
						if r.injector {
							time.Sleep(3 * time.Second)
							mhook.Start(t)
						}
						restarted.Store(time.Now().UnixNano())
					}()
				}
			}
			s := stacktest.NewStack(t, env, "retry-"+r.name, func(ctx *pulumi.Context) error {
				if r.hand {
					if err := readiness.AutoRetry(ctx, nil); err != nil {
						return err
					}
				} else if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "60s"}); err != nil {
					return err
				}
				if err := ctx.RegisterResourceTransform(stacktest.AfterGates(t, ctx, "gizmo", fault)); err != nil {
					return err
				}
				vwc, err := stack.NewKube(ctx, "vwc", vhook.ConfigurationFor("ValidatingWebhookConfiguration", cfg, group, "gizmos"))
				if err != nil {
					return err
				}
				deps := []pulumi.Resource{vwc}
				if r.injector {
					doc := strings.Replace(mhook.ConfigurationFor("MutatingWebhookConfiguration", cfg, group, "gizmos"), "failurePolicy: Fail", "failurePolicy: Ignore", 1)
					mwc, err := stack.NewKube(ctx, "mwc", doc)
					if err != nil {
						return err
					}
					deps = append(deps, mwc)
				}
				if r.hand {
					obj := testenv.Object(t, gizmo).Object
					gate, err := readiness.NewAdmissionReady(ctx, "gizmo-admission", &readiness.AdmissionReadyArgs{
						Objects: pulumi.MapArray{pulumi.ToMap(obj)}, Timeout: pulumi.String("60s")}, pulumi.DependsOn(deps))
					if err != nil {
						return err
					}
					deps = []pulumi.Resource{gate}
				}
				_, err = stack.NewKube(ctx, "gizmo", gizmo, pulumi.DependsOn(deps))
				return err
			})
			var out strings.Builder
			_, err := s.Up(context.Background(), optup.ProgressStreams(&out))
			<-apiServerBack
			if r.apiServer {
				testenv.CRDCachesReady(t, group) // the next tests' custom resources
			}
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, out.String())
			}
			if r.wantError != "" {
				stacktest.RequireFailure(t, err, r.wantError)
				if strings.Contains(err.Error(), "retrying create") {
					t.Errorf("a denial was retried:\n%v", err)
				}
				if !strings.Contains(err.Error(), "not retried: a webhook denied it") {
					t.Errorf("the error hook did not say why it did not retry:\n%v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("up failed though the webhook came back:\n%v", err)
			}
			got, gerr := gizmos.Get(context.Background(), r.name, metav1.GetOptions{})
			if gerr != nil {
				t.Fatalf("the Gizmo was not created: %v", gerr)
			}
			if !strings.Contains(out.String(), "retrying create due to on-error hook request") {
				t.Errorf("the Gizmo's create was not retried:\n%s", out.String())
			}
			back := time.Unix(0, restarted.Load())
			if restarted.Load() == 0 {
				t.Fatal("the fault never ran: the object did not wait for its gate")
			}
			stacktest.NotBefore(t, "the Gizmo", got.GetCreationTimestamp().Time, back.Truncate(time.Second))
			if r.injector && got.GetLabels()["readiness.test/mutated"] != "yes" {
				t.Errorf("the Gizmo was created past the Ignore injector that had not come back: labels %v", got.GetLabels())
			}
			// Pulumi records the hook's name in the state (docs/retry.md: why `destroy` without the
			// program reports it when a delete fails).
			if dep, err := s.Export(context.Background()); err != nil {
				t.Error(err)
			} else if !strings.Contains(string(dep.Deployment), `"readiness-retry"`) {
				t.Errorf("the state does not name the error hook")
			}
			t.Logf("up:\n%s", out.String())
			stacktest.Destroy(t, s)
		})
	}
}
