package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
