package realnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
)

// requireRealNode skips t on a machine that cannot run a real node, but fails it in CI, where
// .ci/run installs what a node needs: a real-node test must never pass by being skipped there.
func requireRealNode(t *testing.T) {
	t.Helper()
	if m := Requirements(); m != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("a real node needs %s; .ci/run installs them", m)
		}
		t.Skipf("no real node on this machine: needs %s", m)
	}
}

// The kubelet itself: a pod that mounts a Secret not yet made fails with the kubelet's own
// FailedMount event (field report 000's error), and runs once the Secret exists. After Stop
// the host has back what the node changed.
func TestRealNodeRunsPodsAndGivesTheHostBack(t *testing.T) {
	requireRealNode(t)
	// One real node per machine: under `go test ./...` this test waits while
	// tests/e2e/realnode's node runs (minutes), then gets three minutes of its own.
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancelStart()
	node, err := Start(startCtx, controlplane.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// What the host had before this node's kubelet (read under the machine's node lock).
	panicBefore := node.ns.sysctls["kernel/panic"]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stopped := false
	defer func() {
		if !stopped {
			if t.Failed() {
				t.Log(node.Pressure(context.Background()))
			}
			node.Stop()
		}
	}()
	t.Logf("control plane and real node up in %s", node.StartTime.Round(time.Millisecond))
	c := node.Client
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mounts-tls", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: sandboxImage, ImagePullPolicy: corev1.PullNever,
				VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}}},
			Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}}},
		},
	}
	events, err := c.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var failedMount string
	for failedMount == "" {
		select {
		case ev := <-events.ResultChan():
			if e, ok := ev.Object.(*corev1.Event); ok && e.Reason == "FailedMount" {
				failedMount = e.Message
			}
		case <-ctx.Done():
			t.Fatal("no FailedMount event from the kubelet")
		}
	}
	if !strings.Contains(failedMount, `secret "web-tls" not found`) || !strings.Contains(failedMount, "MountVolume.SetUp failed") {
		t.Fatalf("FailedMount says %q", failedMount)
	}
	if _, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web-tls", Namespace: "default"},
		Data:       map[string][]byte{"tls.crt": []byte("x")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for running := false; !running; {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				running = p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
			}
		case <-ctx.Done():
			t.Fatal("the pod did not run after its Secret was made")
		}
	}
	// A healthy node reports no pressure: the kubelet's own "NodeHasNoDiskPressure" and
	// "NodeHasSufficientMemory" events at its start are not pressure.
	if p := node.Pressure(ctx); p != "" {
		t.Errorf("a node with room reports pressure: %s", p)
	}
	ns := node.NetnsPath()
	nsLink, _ := os.Readlink(ns)
	node.Stop()
	stopped = true
	if left := processesIn(nsLink, -1); len(left) > 0 {
		t.Errorf("processes left in the node's namespace: %v", left)
	}
	if roots := kubepodsRoots(); len(roots) > 0 {
		t.Errorf("kubelet cgroups left on the host: %v", roots)
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/panic"); strings.TrimSpace(string(after)) != panicBefore {
		t.Errorf("kernel.panic is %q after the node, %q before", after, panicBefore)
	}
}

// A real node on a disk too full for its kubelet refuses to start, naming the free space,
// instead of starting a node that admits no pod (a tmpfs of 1 GiB stands for the full disk).
func TestRealNodeRefusesAFullDisk(t *testing.T) {
	requireRealNode(t)
	dir := smallDisk(t, "1g")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	node, err := Start(ctx, controlplane.Options{Dir: dir})
	if err == nil {
		node.Stop()
		t.Fatal("a real node started on a disk with 1 GiB free")
	}
	if !strings.Contains(err.Error(), "free of 1.0 GiB") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("the refusal does not name the disk and its free space: %v", err)
	}
	t.Log(err)
	// Nothing of a node was started: no process of it, and the host's folders untouched.
	if out, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "node")).Output(); len(out) > 0 {
		t.Fatalf("processes of the refused node: %s", out)
	}
}

// A node whose disk fills while it runs: the kubelet reports DiskPressure, and NodePressure says
// so with the kubelet's event and the free space, for a failed test to print. The node's folder
// is a tmpfs just large enough to start on, filled after the node is Ready.
func TestRealNodeReportsDiskPressure(t *testing.T) {
	requireRealNode(t)
	// The start check wants 1 % and 2 GiB free: 2200 MiB passes it.
	dir := smallDisk(t, "2200m")
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancelStart()
	node, err := Start(startCtx, controlplane.Options{Dir: filepath.Join(dir, "node")})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if p := node.Pressure(ctx); p != "" {
		t.Fatalf("pressure before the disk filled: %s", p)
	}
	// Leave 8 MiB: below the kubelet's 1 % (22 MiB) of this disk.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	fill := int64(st.Bavail)*st.Bsize - 8<<20
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, fill); err != nil {
		t.Fatalf("filling the disk: %v", err)
	}
	f.Close()
	w, err := node.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", NodeName).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for pressed := false; !pressed; {
		select {
		case ev := <-w.ResultChan():
			if nd, ok := ev.Object.(*corev1.Node); ok {
				pressed = strings.Contains(nodePressure(nd), "DiskPressure")
			}
		case <-ctx.Done():
			t.Fatal("the kubelet reported no DiskPressure on a full disk")
		}
	}
	p := node.Pressure(ctx)
	for _, want := range []string{"now: DiskPressure", "MiB free of 2.1 GiB"} {
		if !strings.Contains(p, want) {
			t.Errorf("Pressure does not say %q:\n%s", want, p)
		}
	}
	t.Log(p)
}

// smallDisk mounts a tmpfs of size (mount's -o size=) on a temporary folder, unmounted when the
// test ends: a disk of a known size for a node to start on.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "readiness-small-disk", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs of %s: %v: %s", size, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}
