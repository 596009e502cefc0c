package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/testregistry"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestImageReadyPullsThroughContainerd is field report 003 on the real node: CI pushes the
// image to a real registry (served by this process on 127.0.0.1, and at the same address
// inside the node's namespace, so one reference is good for the gate and for containerd)
// while the Deployment that runs it is being created. Without a gate the kubelet pulls the
// tag before it exists and reports the real ErrImagePull (the registry's "not found" through
// containerd), then ImagePullBackOff; the pod runs only once the kubelet's backoff retries
// after the push. With ImageReady the Deployment is created after the push, runs the pinned
// digest, and containerd pulls exactly that digest at the first try.
func TestImageReadyPullsThroughContainerd(t *testing.T) {
	env := stacktest.Prepare(t)
	platform := "linux/" + runtime.GOARCH

	deployment := func(ctx *pulumi.Context, ns, mode string, image pulumi.StringInput, opts ...pulumi.ResourceOption) error {
		// Autonamed by pulumi-kubernetes; pulumi-kubernetes waits for its rollout.
		_, err := stack.NewKubeFrom(ctx, "app", map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			// A rollout that never comes fails the stack in minutes, not pulumi-kubernetes' 10.
			"metadata": map[string]any{"namespace": ns, "annotations": map[string]any{"pulumi.com/timeoutSeconds": "180"}},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "app-" + mode}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "app-" + mode}},
					"spec": map[string]any{
						"terminationGracePeriodSeconds": 1,
						"containers": []any{map[string]any{
							"name": "app", "image": image, "imagePullPolicy": "IfNotPresent",
						}},
					},
				},
			},
		}, opts...)
		return err
	}

	t.Run("none", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		reg := nodeRegistry(t)
		ns := testenv.Namespace(t, "image-none")
		ref := reg.Ref("app:v1")
		kubelet := watchKubeletEvents(ctx, t, ns)
		pods := watchWaitingReasons(ctx, t, ns)
		img := appImage(t, "none")
		// CI is slower than the Deployment: it pushes once the kubelet has failed a pull.
		type push struct {
			at  time.Time
			err error
		}
		pushed := make(chan push, 1)
		go func() {
			select {
			case <-kubelet.failedPull:
			case <-ctx.Done():
				return
			}
			at := time.Now()
			_, err := reg.Push("app:v1", img)
			pushed <- push{at, err}
		}()
		s := stacktest.NewStack(t, env, "image-none", func(ctx *pulumi.Context) error {
			return deployment(ctx, ns, "none", pulumi.String(ref))
		})
		began := time.Now()
		var out strings.Builder
		_, err := s.Up(ctx, optup.ProgressStreams(&out))
		took := time.Since(began)
		events, reasons := kubelet.stop(), pods()
		t.Logf("without a gate: up returned after %s (err: %v)", took.Round(time.Millisecond), err)
		t.Logf("the kubelet said:\n%s", strings.Join(events, "\n"))
		t.Logf("the pod's waiting reasons: %v", reasons)
		failed := firstLine(strings.Join(events, "\n"), "Failed to pull image")
		if failed == "" || !strings.Contains(failed, ref) || !strings.Contains(failed, "not found") {
			t.Fatalf("without a gate the kubelet must fail to pull %s with the registry's not found; it said %q", ref, events)
		}
		if !slices.Contains(reasons, "ErrImagePull") && !slices.Contains(reasons, "ImagePullBackOff") {
			t.Fatalf("the pod never waited on ErrImagePull/ImagePullBackOff: %v", reasons)
		}
		select {
		case p := <-pushed:
			if p.err != nil {
				t.Fatalf("push: %v", p.err)
			}
			if err == nil {
				t.Logf("pushed %s after the failed pull; the pod ran %s after the push (the kubelet's backoff)",
					ref, podStartedAt(ctx, t, ns, "app=app-none").Sub(p.at).Round(time.Millisecond))
			}
		default:
		}
		stacktest.Destroy(t, s)
	})

	t.Run("gate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		reg := nodeRegistry(t)
		ns := testenv.Namespace(t, "image-gate")
		ref := reg.Ref("app:v1")
		kubelet := watchKubeletEvents(ctx, t, ns)
		img := appImage(t, "gate")
		digest, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		s := stacktest.NewStack(t, env, "image-gate", func(ctx *pulumi.Context) error {
			gate, err := readiness.NewImageReady(ctx, "app-image", &readiness.ImageReadyArgs{
				Image: pulumi.String(ref), Platform: pulumi.String(platform), Timeout: pulumi.String("2m"),
			})
			if err != nil {
				return err
			}
			ctx.Export("pinned", gate.Pinned)
			return deployment(ctx, ns, "gate", gate.Pinned, pulumi.DependsOn([]pulumi.Resource{gate}))
		})
		// Play CI: the image is pushed a while after `pulumi up` started.
		pushErr := make(chan error, 1)
		var pushedAt time.Time
		go func() {
			time.Sleep(3 * time.Second)
			pushedAt = time.Now()
			_, err := reg.Push("app:v1", img)
			pushErr <- err
		}()
		began := time.Now()
		res, out := stacktest.Up(t, s)
		took := time.Since(began)
		if err := <-pushErr; err != nil {
			t.Fatalf("push: %v", err)
		}
		events := kubelet.stop()
		t.Logf("with ImageReady: up in %s (pushed %s after up began)\n%s", took.Round(time.Millisecond),
			pushedAt.Sub(began).Round(time.Millisecond), createdLines(out))
		t.Logf("the kubelet said:\n%s", strings.Join(events, "\n"))
		pinned := reg.Ref("app@" + digest.String())
		if got := res.Outputs["pinned"].Value; got != pinned {
			t.Fatalf("pinned = %v, want %s", got, pinned)
		}
		if f := firstLine(strings.Join(events, "\n"), "Failed"); f != "" {
			t.Errorf("with ImageReady the kubelet must pull at once; it said %q", f)
		}
		pulled := firstLine(strings.Join(events, "\n"), "Successfully pulled image")
		if !strings.Contains(pulled, pinned) {
			t.Errorf("the kubelet must pull the pinned digest %s; it said %q", pinned, events)
		}
		p := onePod(ctx, t, ns, "app=app-gate")
		if len(p.Status.ContainerStatuses) != 1 || !strings.Contains(p.Status.ContainerStatuses[0].ImageID, digest.String()) {
			t.Fatalf("the pod must run the pushed digest %s: %+v", digest, p.Status.ContainerStatuses)
		}
		t.Logf("the pod runs %s (imageID %s)", p.Status.ContainerStatuses[0].Image, p.Status.ContainerStatuses[0].ImageID)
		stacktest.Destroy(t, s)
	})
}

// nodeRegistry is a plain-HTTP registry served by this process on 127.0.0.1:PORT on the host
// (for the gate and the pushes) and at the same address inside the node's namespace (for
// containerd, which uses plain HTTP for a loopback registry).
func nodeRegistry(t *testing.T) *testregistry.Registry {
	t.Helper()
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	ln, err := testenv.Node.ListenInNamespace("tcp", reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	reg.ServeOn(ln)
	return reg
}

// appImage is an image that runs on the node: the node's pause binary (a static Go program)
// plus a layer of its own, so its digest and that layer are new to containerd and the pull
// really fetches them.
func appImage(t *testing.T, tag string) v1.Image {
	t.Helper()
	path, err := realnode.PauseImage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	base, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte(tag + " " + hex.EncodeToString(nonce) + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "build-id", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(body)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// kubeletEvents collects the kubelet's events in a namespace ("Reason: message"); failedPull
// closes at its first failed pull.
type kubeletEvents struct {
	failedPull chan struct{}
	stop       func() []string
}

func watchKubeletEvents(ctx context.Context, t *testing.T, ns string) kubeletEvents {
	t.Helper()
	w, err := testenv.CP.Client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "source=kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	k := kubeletEvents{failedPull: make(chan struct{})}
	var mu sync.Mutex
	var msgs []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*corev1.Event)
			if !ok || e.Reason == "MissingClusterDNS" { // every sync, on a node without cluster DNS
				continue
			}
			mu.Lock()
			msgs = append(msgs, e.Reason+": "+e.Message)
			mu.Unlock()
			if e.Reason == "Failed" && strings.Contains(e.Message, "Failed to pull image") {
				once.Do(func() { close(k.failedPull) })
			}
		}
	}()
	k.stop = func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return msgs
	}
	t.Cleanup(w.Stop)
	return k
}

// watchWaitingReasons collects the waiting reasons of the pods' containers in ns, in the order
// they were first seen; the returned function stops and returns them.
func watchWaitingReasons(ctx context.Context, t *testing.T, ns string) func() []string {
	t.Helper()
	w, err := testenv.CP.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reasons []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Waiting != nil && !slices.Contains(reasons, c.State.Waiting.Reason) {
					reasons = append(reasons, c.State.Waiting.Reason)
				}
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return reasons
	}
}

func onePod(ctx context.Context, t *testing.T, ns, selector string) corev1.Pod {
	t.Helper()
	pods, err := testenv.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("want one pod %s in %s: %v (%d)", selector, ns, err, len(pods.Items))
	}
	return pods.Items[0]
}

// podStartedAt is when the pod's container started, as the kubelet reported it.
func podStartedAt(ctx context.Context, t *testing.T, ns, selector string) time.Time {
	t.Helper()
	p := onePod(ctx, t, ns, selector)
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.State.Running.StartedAt.Time
		}
	}
	t.Fatalf("pod %s is not running", p.Name)
	return time.Time{}
}
