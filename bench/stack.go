package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optremove"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// stackOverhead runs a stack of n gates whose targets turn ready at staggered, known times and
// reports how much longer `up` took than the latest ready time.
func (b *bench) stackOverhead(ctx context.Context, n int) (stackResult, error) {
	res := stackResult{gates: n, parallel: 64}
	env, err := stack.Prepare(ctx, b.dir)
	if err != nil {
		return res, err
	}
	var objs []*unstructured.Unstructured
	for i := 0; i < n; i++ {
		o, err := b.create(ctx, widgets, "bench-2", fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: stack-%d, namespace: bench-2}", group, i))
		if err != nil {
			return res, err
		}
		objs = append(objs, o)
	}
	program := func(ctx *pulumi.Context) error {
		for _, o := range objs {
			if _, err := readiness.NewResourceReady(ctx, o.GetName(), &readiness.ResourceReadyArgs{
				ApiVersion: pulumi.String(group + "/v1"), Kind: pulumi.String("Widget"),
				Namespace: pulumi.String("bench-2"), Name: pulumi.String(o.GetName()),
				Condition: &readiness.ConditionArgs{Type: pulumi.String("Ready")},
			}); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := env.Stack(ctx, "bench", "overhead", string(b.cp.Kubeconfig), program)
	if err != nil {
		return res, err
	}
	start := time.Now()
	// Targets turn ready 3 s after up starts, then one every 100 ms.
	go func() {
		for i, o := range objs {
			time.Sleep(time.Until(start.Add(3*time.Second + time.Duration(i)*100*time.Millisecond)))
			_ = b.setReady(ctx, widgets, o, nil)
		}
	}()
	evs := make(chan events.EngineEvent)
	var lastGate, summary time.Time
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for e := range evs {
			switch {
			case e.ResOutputsEvent != nil && e.ResOutputsEvent.Metadata.Type == "readiness:index:ResourceReady":
				lastGate = time.Now()
			case e.SummaryEvent != nil:
				summary = time.Now()
			}
		}
	}()
	if _, err := s.Up(ctx, optup.Parallel(res.parallel), optup.EventStreams(evs)); err != nil {
		return res, err
	}
	res.upWall = time.Since(start)
	<-collected
	res.lastGate, res.summary = lastGate.Sub(start), summary.Sub(start)
	res.lastReady = 3*time.Second + time.Duration(n-1)*100*time.Millisecond
	_, _ = s.Destroy(ctx, optdestroy.Remove())
	return res, nil
}

// engineRun is one `up` of the checkpointing comparison.
type engineRun struct {
	label      string
	allStarted time.Duration // up began → every gate's step had started (engine events)
	lastGate   time.Duration // last target ready → last gate completed (engine event)
	summary    time.Duration // last target ready → the engine's summary event
	upReturned time.Duration // last target ready → the Automation API's Up returned
	upWall     time.Duration
}

type engineScaleResult struct {
	gates, parallel int
	runs            []engineRun
}

// engineScale runs a stack of n gates twice, with Pulumi's default checkpointing and with
// PULUMI_SKIP_CHECKPOINTS=true: every gate waits, then every target turns ready at once, and
// the figures are taken from the last write that made a target ready.
func (b *bench) engineScale(ctx context.Context, n int) (engineScaleResult, error) {
	res := engineScaleResult{gates: n, parallel: max(n, 64)}
	env, err := stack.Prepare(ctx, b.dir)
	if err != nil {
		return res, err
	}
	for _, label := range []string{"default", "skip-checkpoints", "selector"} {
		run, err := b.engineScaleRun(ctx, env, n, res.parallel, label)
		if err != nil {
			return res, fmt.Errorf("%s: %w", label, err)
		}
		res.runs = append(res.runs, run)
	}
	return res, nil
}

// engineScaleRun runs one `up` over n fresh objects: "default" and "skip-checkpoints" with one
// gate per object, "selector" with one gate for all of them (selector + minCount), default
// checkpointing.
func (b *bench) engineScaleRun(ctx context.Context, env *stack.Env, n, parallel int, label string) (engineRun, error) {
	run := engineRun{label: label}
	skip, selector := label == "skip-checkpoints", label == "selector"
	gates := n
	if selector {
		gates = 1
	}
	ns := "bench-scale-" + label
	if _, err := b.cp.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}"); err != nil {
		return run, err
	}
	objs := make([]*unstructured.Unstructured, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o, err := b.create(ctx, widgets, ns, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w-%d, namespace: %s, labels: {app: fleet}}", group, i, ns))
			objs[i] = o
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return run, err
	}
	program := func(ctx *pulumi.Context) error {
		if selector {
			_, err := readiness.NewResourceReady(ctx, "fleet", &readiness.ResourceReadyArgs{
				ApiVersion: pulumi.String(group + "/v1"), Kind: pulumi.String("Widget"), Namespace: pulumi.String(ns),
				Selector: pulumi.String("app=fleet"), MinCount: pulumi.Int(n),
				Condition: &readiness.ConditionArgs{Type: pulumi.String("Ready")},
			})
			return err
		}
		for _, o := range objs {
			if _, err := readiness.NewResourceReady(ctx, o.GetName(), &readiness.ResourceReadyArgs{
				ApiVersion: pulumi.String(group + "/v1"), Kind: pulumi.String("Widget"),
				Namespace: pulumi.String(ns), Name: pulumi.String(o.GetName()),
				Condition: &readiness.ConditionArgs{Type: pulumi.String("Ready")},
			}); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := env.Stack(ctx, "benchscale", label, string(b.cp.Kubeconfig), program)
	if err != nil {
		return run, err
	}
	if skip {
		s.Workspace().SetEnvVar("PULUMI_SKIP_CHECKPOINTS", "true")
	}
	defer func() {
		_ = s.Workspace().RemoveStack(context.Background(), label, optremove.Force()) // the gates own nothing in the cluster
		_ = b.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	const gateType = "readiness:index:ResourceReady"
	start := time.Now()
	evs := make(chan events.EngineEvent)
	allStarted := make(chan struct{})
	var lastGate, summary time.Time
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		started := 0
		for e := range evs {
			switch {
			case e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type == gateType:
				if started++; started == gates {
					run.allStarted = time.Since(start)
					close(allStarted)
				}
			case e.ResOutputsEvent != nil && e.ResOutputsEvent.Metadata.Type == gateType:
				lastGate = time.Now()
			case e.SummaryEvent != nil:
				summary = time.Now()
			}
		}
	}()
	upErr := make(chan error, 1)
	var upDone time.Time
	go func() {
		_, err := s.Up(ctx, optup.Parallel(parallel), optup.EventStreams(evs))
		upDone = time.Now()
		upErr <- err
	}()
	select {
	case <-allStarted:
	case err := <-upErr:
		return run, fmt.Errorf("up ended before every gate started: %v", err)
	}
	time.Sleep(3 * time.Second) // every gate's Create has reached the provider and is waiting on its watch
	var mu sync.Mutex
	var last time.Time
	for _, o := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := b.setReady(ctx, widgets, o, nil); err != nil {
				fmt.Fprintln(os.Stderr, "engine scale write:", err)
			}
			mu.Lock()
			if now := time.Now(); now.After(last) {
				last = now
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := <-upErr; err != nil {
		return run, err
	}
	<-collected
	run.upWall = upDone.Sub(start)
	run.lastGate, run.summary, run.upReturned = lastGate.Sub(last), summary.Sub(last), upDone.Sub(last)
	return run, nil
}
