package autogate

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func TestZZChain(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	env := stacktest.Prepare(t)
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: zz}")
	for _, auto := range []bool{false, true, false, true} {
		s := stacktest.NewStack(t, env, fmt.Sprintf("zz%v", auto), func(ctx *pulumi.Context) error {
			if auto {
				if err := readiness.AutoGate(ctx, nil); err != nil {
					return err
				}
			}
			var prev pulumi.Resource
			for i := 0; i < 20; i++ {
				var opts []pulumi.ResourceOption
				if prev != nil {
					opts = append(opts, pulumi.DependsOn([]pulumi.Resource{prev}))
				}
				r, err := stack.NewKube(ctx, fmt.Sprintf("c%02d", i), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%02d, namespace: zz}\ndata: {a: b}", i), opts...)
				if err != nil {
					return err
				}
				prev = r
			}
			return nil
		})
		pre, out := map[string]time.Time{}, map[string]time.Time{}
		evs := make(chan events.EngineEvent)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range evs {
				now := time.Now()
				if e := ev.ResourcePreEvent; e != nil {
					pre[e.Metadata.URN[strings.LastIndex(e.Metadata.URN, "::")+2:]] = now
				}
				if e := ev.ResOutputsEvent; e != nil {
					out[e.Metadata.URN[strings.LastIndex(e.Metadata.URN, "::")+2:]] = now
				}
			}
		}()
		if _, err := s.Up(context.Background(), optup.EventStreams(evs)); err != nil {
			t.Fatal(err)
		}
		<-done
		var links, steps []time.Duration
		for i := 1; i < 20; i++ {
			links = append(links, pre[fmt.Sprintf("c%02d", i)].Sub(out[fmt.Sprintf("c%02d", i-1)]))
			steps = append(steps, out[fmt.Sprintf("c%02d", i)].Sub(pre[fmt.Sprintf("c%02d", i)]))
		}
		sort.Slice(links, func(i, j int) bool { return links[i] < links[j] })
		sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
		t.Logf("autoGate %v: link (outputs of one → pre of next) p50 %s max %s; step p50 %s", auto, links[9], links[18], steps[9])
		stacktest.Destroy(t, s)
	}
}
