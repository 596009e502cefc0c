package realnode

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestSoakRealFieldReport001 (READINESS_SOAK=N rounds; `make soak` runs 20 beside another
// test package for load): field report 001's stack with autoGate's line, on real External
// Secrets pods, brought up and destroyed N times in a row. Every round must pass, and each
// gate must return within 100 ms of its condition turning true (or of its own start, for a
// gate the engine starts after that), as an observer outside the product sees it: for AdmissionReady, the first dry-run of an ExternalSecret the real
// webhook admits (the observer tries one every 10 ms); for HelmReleaseReady, that and the
// release's Deployments all available. A gate that times out says what it last saw.
func TestSoakRealFieldReport001(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("READINESS_SOAK"))
	if rounds <= 0 {
		t.Skip("READINESS_SOAK=N runs N rounds (make soak)")
	}
	ctx := context.Background()
	if err := charts.ExternalSecretsChart.LoadImages(ctx, testenv.CP, t.Logf); err != nil {
		t.Fatal(err)
	}
	chart, err := charts.ExternalSecretsChart.Write(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := stacktest.Prepare(t)
	program := func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "4m"}); err != nil {
			return err
		}
		release, err := stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
			"chart": pulumi.String(chart), "name": pulumi.String("external-secrets"),
			"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true),
			"skipAwait": pulumi.Bool(true),
		})
		if err != nil {
			return err
		}
		for _, ns := range report001Namespaces {
			opts := []pulumi.ResourceOption{pulumi.DependsOn([]pulumi.Resource{release})}
			if ns != "default" {
				n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
				if err != nil {
					return err
				}
				opts = append(opts, pulumi.DependsOn([]pulumi.Resource{n}))
			}
			if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, report001ExternalSecret(ns), opts...); err != nil {
				return err
			}
		}
		return nil
	}
	s := stacktest.NewStack(t, env, "soak001", program)
	var lags, ups []time.Duration
	failures := 0
	for round := 1; round <= rounds; round++ {
		obs := observeReport001(ctx, t, testenv.CP)
		gates, started := map[string]time.Time{}, map[string]time.Time{}
		evs := make(chan events.EngineEvent)
		done := make(chan struct{})
		gateName := func(m struct{ typ, urn string }) string {
			return m.typ + " " + m.urn[strings.LastIndex(m.urn, "::")+2:]
		}
		go func() {
			defer close(done)
			for ev := range evs {
				if o := ev.ResourcePreEvent; o != nil && strings.HasPrefix(o.Metadata.Type, "readiness:index:") {
					started[gateName(struct{ typ, urn string }{o.Metadata.Type, o.Metadata.URN})] = time.Now()
				}
				if o := ev.ResOutputsEvent; o != nil && strings.HasPrefix(o.Metadata.Type, "readiness:index:") {
					gates[gateName(struct{ typ, urn string }{o.Metadata.Type, o.Metadata.URN})] = time.Now()
				}
			}
		}()
		began := time.Now()
		var out strings.Builder
		_, err := s.Up(ctx, optup.EventStreams(evs), optup.ProgressStreams(&out))
		took := time.Since(began)
		<-done
		admitted, available := obs.stop()
		if err != nil {
			failures++
			t.Errorf("round %d failed after %s: %v\n%s", round, took.Round(time.Millisecond), err, out.String())
		} else {
			ups = append(ups, took)
		}
		var line []string
		for name, at := range gates {
			cond := admitted
			if strings.HasPrefix(name, "readiness:index:HelmReleaseReady") && available.After(cond) {
				cond = available
			}
			if cond.IsZero() {
				t.Errorf("round %d: %s returned, but the observer never saw its condition hold", round, name)
				continue
			}
			if st := started[name]; st.After(cond) {
				cond = st // a gate started after its condition held: from its start
			}
			lag := at.Sub(cond)
			lags = append(lags, lag)
			line = append(line, fmt.Sprintf("%s %+dms", strings.TrimPrefix(name, "readiness:index:"), lag.Milliseconds()))
			if lag > 100*time.Millisecond {
				t.Errorf("round %d: %s returned %s after its condition held", round, name, lag.Round(time.Millisecond))
			}
		}
		sort.Strings(line)
		t.Logf("round %d: up %s; webhook admitted at +%s, release available at +%s; gates: %s", round,
			took.Round(time.Millisecond), admitted.Sub(began).Round(time.Millisecond), available.Sub(began).Round(time.Millisecond), strings.Join(line, ", "))
		testenv.CRDCachesReady(t, "external-secrets.io")
		stacktest.Destroy(t, s)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	sort.Slice(ups, func(i, j int) bool { return ups[i] < ups[j] })
	if len(lags) > 0 && len(ups) > 0 {
		t.Logf("soak: %d rounds, %d failed; up p50 %s, max %s; gate lag after its condition (%d gates): p50 %s, p95 %s, max %s",
			rounds, failures, ups[len(ups)/2].Round(time.Millisecond), ups[len(ups)-1].Round(time.Millisecond), len(lags),
			lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)*95/100].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
}

// report001Observer watches report 001's conditions from outside the product.
type report001Observer struct {
	mu                  sync.Mutex
	admitted, available time.Time
	cancel              context.CancelFunc
	done                chan struct{}
}

// observeReport001 tries, every 10 ms, a dry-run create of an ExternalSecret (admitted once the
// real webhook answers through its Service) and reads the release's Deployments.
func observeReport001(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) *report001Observer {
	ctx, cancel := context.WithCancel(ctx)
	o := &report001Observer{cancel: cancel, done: make(chan struct{})}
	dyn := testenv.Dynamic(t)
	gvr := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	es, _ := controlplane.Decode(report001ExternalSecret("default"))
	go func() {
		defer close(o.done)
		tick := time.NewTicker(10 * time.Millisecond) // the observer's own clock: the figure's resolution
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			o.mu.Lock()
			admitted, available := !o.admitted.IsZero(), !o.available.IsZero()
			o.mu.Unlock()
			if !admitted {
				obj := &unstructured.Unstructured{Object: es.DeepCopy().Object}
				if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
					o.mu.Lock()
					o.admitted = now
					o.mu.Unlock()
				}
			}
			if !available {
				if deploymentsAvailable(ctx, cp, "external-secrets", 3) {
					o.mu.Lock()
					o.available = now
					o.mu.Unlock()
				}
			}
		}
	}()
	return o
}

func (o *report001Observer) stop() (admitted, available time.Time) {
	o.cancel()
	<-o.done
	return o.admitted, o.available
}

// deploymentsAvailable says whether ns holds at least n Deployments, each rolled out and
// available.
func deploymentsAvailable(ctx context.Context, cp *controlplane.ControlPlane, ns string, n int) bool {
	ds, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(ds.Items) < n {
		return false
	}
	for _, d := range ds.Items {
		if !available(&d) {
			return false
		}
	}
	return true
}

func available(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation || d.Spec.Replicas == nil || d.Status.UpdatedReplicas < *d.Spec.Replicas {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas >= *d.Spec.Replicas
		}
	}
	return false
}
