// Command demo is `make demo`: it starts a local Kubernetes control plane, runs a Pulumi stack
// whose custom resource waits on CrdReady while the CRD arrives late, prints a timeline a person
// can read, destroys the stack and stops the control plane.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// timeline prints lines stamped with the time since the demo's stack started.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	seen  map[string]bool
}

func (tl *timeline) say(format string, a ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	if tl.seen[msg] {
		return
	}
	tl.seen[msg] = true
	fmt.Printf("  t+%6.2fs  %s\n", time.Since(tl.start).Seconds(), msg)
}

func run() error {
	ctx := context.Background()
	fmt.Println("== pulumi-readiness demo ==")
	fmt.Println("Building tools if needed and starting a local control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)...")
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer cp.Stop()
	fmt.Printf("Control plane ready in %s at %s\n", cp.StartTime.Round(time.Millisecond), cp.Host)

	dir, err := os.MkdirTemp("", "readiness-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := stack.Prepare(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Println("Note: Kubernetes objects inside the stack are created by a small stand-in provider (kubetest),")
	fmt.Println("      because the pulumi-kubernetes plugin cannot be installed offline; users use pulumi-kubernetes.")

	const group = "demo.readiness.io"
	program := func(ctx *pulumi.Context) error {
		gate, err := readiness.NewCrdReady(ctx, "widgets-crd", &readiness.CrdReadyArgs{
			Names:   pulumi.StringArray{pulumi.String("widgets." + group)},
			Timeout: pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		_, err = stack.NewKubeObject(ctx, "my-widget",
			"apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: my-widget, namespace: default}\nspec: {size: 3}",
			pulumi.DependsOn([]pulumi.Resource{gate}))
		ctx.Export("kinds", gate.Kinds)
		return err
	}
	s, err := env.Stack(ctx, "readiness-demo", "dev", string(cp.Kubeconfig), program)
	if err != nil {
		return err
	}

	fmt.Println("\nStory (field report 002): a custom resource is applied while its CRD is still being installed.")
	fmt.Println("Without a gate: `no matches for kind \"Widget\"`. With CrdReady in front, the stack just waits.")
	fmt.Println("\nTimeline of `pulumi up` (the demo installs the CRD 5 s after the stack starts):")
	tl := &timeline{start: time.Now(), seen: map[string]bool{}}
	go func() {
		time.Sleep(5 * time.Second)
		if err := installCRD(ctx, cp, group); err != nil {
			tl.say("demo: installing the CRD failed: %v", err)
			return
		}
		tl.say("demo: CRD widgets.%s installed (as a slow Helm release would)", group)
	}()
	evs := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range evs {
			describe(tl, e)
		}
	}()
	res, err := s.Up(ctx, optup.EventStreams(evs))
	<-done
	if err != nil {
		return fmt.Errorf("pulumi up: %w", err)
	}
	tl.say("pulumi up finished: kinds=%v", res.Outputs["kinds"].Value)

	fmt.Println("\nDestroying the stack (gates delete nothing in the cluster)...")
	if _, err := s.Destroy(ctx, optdestroy.Remove()); err != nil {
		return fmt.Errorf("pulumi destroy: %w", err)
	}
	fmt.Println("Stopping the control plane. Demo succeeded.")
	return nil
}

func describe(tl *timeline, e events.EngineEvent) {
	short := func(urn string) string {
		parts := strings.Split(urn, "::")
		if len(parts) < 2 {
			return urn
		}
		return parts[len(parts)-2] + " " + parts[len(parts)-1]
	}
	switch {
	case e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type != "pulumi:pulumi:Stack" &&
		!strings.HasPrefix(e.ResourcePreEvent.Metadata.Type, "pulumi:providers:"):
		tl.say("%s: %s started", short(e.ResourcePreEvent.Metadata.URN), e.ResourcePreEvent.Metadata.Op)
	case e.ResOutputsEvent != nil && e.ResOutputsEvent.Metadata.Type != "pulumi:pulumi:Stack" &&
		!strings.HasPrefix(e.ResOutputsEvent.Metadata.Type, "pulumi:providers:"):
		tl.say("%s: %s done", short(e.ResOutputsEvent.Metadata.URN), e.ResOutputsEvent.Metadata.Op)
	case e.DiagnosticEvent != nil && e.DiagnosticEvent.URN != "" && strings.TrimSpace(e.DiagnosticEvent.Message) != "":
		tl.say("%s: %s", short(e.DiagnosticEvent.URN), strings.TrimSpace(e.DiagnosticEvent.Message))
	case e.ResOpFailedEvent != nil:
		tl.say("%s: FAILED", short(e.ResOpFailedEvent.Metadata.URN))
	}
}

func installCRD(ctx context.Context, cp *controlplane.ControlPlane, group string) error {
	doc := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return err
	}
	d, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err = d.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	return err
}
