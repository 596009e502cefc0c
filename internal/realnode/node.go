package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// startNode starts containerd, loads the pause image, and starts the kubelet and kube-proxy,
// then waits for the node to be Ready.
func (n *Node) startNode(ctx context.Context) error {
	// The components' kubeconfig: it dials the API server inside the namespace.
	nodeKubeconfig := n.ComponentKubeconfigPath
	st := filepath.Join(n.dir, "node")
	for _, d := range []string{st, filepath.Join(st, "net.d"), filepath.Join(st, "kubelet")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sock := n.ContainerdSocket()
	files := map[string]string{
		"containerd.toml":             fmt.Sprintf(containerdConfig, st, st, sock, sock, st, sandboxImage, cniBinDir, filepath.Join(st, "net.d")),
		"net.d/10-readiness.conflist": fmt.Sprintf(cniConfig, podCIDR, nodeIP, filepath.Join(st, "cni-ipam")),
		"kubelet.yaml":                fmt.Sprintf(kubeletConfig, sock, sock, filepath.Join(n.dir, "resolv.conf")),
		"kube-proxy.yaml":             fmt.Sprintf(kubeProxyConfig, nodeKubeconfig, NodeName, podCIDR, nodeIP),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(st, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	n.runtime = map[string][]string{
		"containerd": {"containerd", "--config", filepath.Join(st, "containerd.toml")},
		"kubelet": {filepath.Join(n.binDir, "kubelet"),
			"--config=" + filepath.Join(st, "kubelet.yaml"), "--kubeconfig=" + nodeKubeconfig,
			"--root-dir=" + filepath.Join(st, "kubelet"), "--cert-dir=" + filepath.Join(st, "kubelet", "pki"),
			"--hostname-override=" + NodeName, "--node-ip=" + nodeIP, "-v=1"},
	}
	if err := n.startRuntime("containerd"); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	pause, err := PauseImage(ctx)
	if err != nil {
		return err
	}
	if err := n.LoadImage(ctx, pause); err != nil {
		return err
	}
	if err := n.startRuntime("kubelet"); err != nil {
		return err
	}
	if err := n.StartProcess("kube-proxy", filepath.Join(n.binDir, "kube-proxy"),
		"--config="+filepath.Join(st, "kube-proxy.yaml"), "-v=1"); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

func (n *Node) startRuntime(name string) error {
	cmd := n.runtime[name]
	return n.StartProcess(name, cmd[0], cmd[1:]...)
}

// RestartRuntime restarts containerd and the kubelet as a node's service manager would (the
// containers keep running under their shims), and waits until containerd answers and the node
// is Ready again: a fault for tests of a rebuild (issue 50).
func (n *Node) RestartRuntime(ctx context.Context) error {
	n.StopProcess("kubelet")
	n.StopProcess("containerd")
	if err := n.startRuntime("containerd"); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	// containerd answers before its CRI plugin has restored its containers, and a kubelet that
	// meets "server is not initialized yet" exits: start it again until it stays up.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if err := n.startRuntime("kubelet"); err != nil {
			return err
		}
		time.Sleep(3 * time.Second)
		if !n.Exited("kubelet") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kubelet keeps exiting after containerd's restart\n--- kubelet log ---\n%s", n.LogTail("kubelet", 10))
		}
	}
	return n.waitReady(ctx)
}

// KillContainer kills a running container's task with SIGKILL through containerd, as the kernel's
// OOM killer does: the kubelet then restarts it in the same pod (id: a pod status' containerID,
// with or without its "containerd://" prefix).
func (n *Node) KillContainer(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	if out, err := n.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return fmt.Errorf("killing container %s: %v: %s", id, err, out)
	}
	return nil
}

// ContainerdSocket is the real node's containerd socket (its path is reachable from the host).
func (n *Node) ContainerdSocket() string {
	return filepath.Join(n.dir, "node", "containerd.sock")
}

func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", n.ContainerdSocket(), "-n", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

func (n *Node) waitContainerd(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(n.ContainerdSocket()); err == nil {
			if _, err := n.ctr(ctx, "version"); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond) // start-up of a daemon we started; it has no event to watch
	}
	return fmt.Errorf("containerd not up after 30s\n--- containerd log ---\n%s", n.LogTail("containerd", 20))
}

// LoadImage imports an image archive (docker-archive or OCI tar, as tools.BuildImage writes) into
// the real node's containerd, as `kind load image-archive` does: pods then start it without a
// pull (imagePullPolicy IfNotPresent, the charts' default for tagged images).
func (n *Node) LoadImage(ctx context.Context, tarPath string) error {
	if b, err := n.ctr(ctx, "images", "import", "--no-unpack=false", tarPath); err != nil {
		return fmt.Errorf("loading %s into the node: %v: %s", filepath.Base(tarPath), err, b)
	}
	return nil
}

func (n *Node) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		nd, err := n.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil {
			if p := nodePressure(nd); p != "" {
				return fmt.Errorf("real node %s is under pressure and admits no pod: %s", NodeName, p)
			}
			for _, c := range nd.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond) // harness start-up only
	}
	return fmt.Errorf("real node %s not Ready after 90s\n--- kubelet log ---\n%s\n--- containerd log ---\n%s",
		NodeName, n.LogTail("kubelet", 30), n.LogTail("containerd", 10))
}

// Pressure says whether the real node was ever short of disk, memory or PIDs while it ran:
// the pressure conditions that hold now and the kubelet's events of one (EvictionThresholdMet,
// NodeHasDiskPressure, ...), with the disk's free space; "" when there were none. A node under
// pressure can be Ready and admit no pod: this tells a test whose pods never started whether
// the node took them at all.
func (n *Node) Pressure(ctx context.Context) string {
	var parts []string
	if nd, err := n.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err != nil {
		parts = append(parts, fmt.Sprintf("reading node %s: %v", NodeName, err))
	} else if p := nodePressure(nd); p != "" {
		parts = append(parts, "now: "+p)
	}
	evs, err := n.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		parts = append(parts, fmt.Sprintf("listing the node's events: %v", err))
	} else {
		for _, e := range evs.Items {
			if pressureEvents[e.Reason] {
				parts = append(parts, fmt.Sprintf("event %s (%dx, last at %s): %s", e.Reason, max(e.Count, 1), e.LastTimestamp.Format(time.TimeOnly), e.Message))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	if err := checkNodeDisk(filepath.Join(n.dir, "node")); err != nil {
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "\n")
}

// stopComponents takes down, in order, what startNode started: the kubelet and kube-proxy
// (so nothing restarts a container), the containers through containerd, any process left in
// the kubepods cgroups, containerd. (After the control plane, stopNamespace ends every
// process left in the namespace, the anchor, the kubelet's cgroups and host sysctls.)
func (n *Node) stopComponents() {
	n.StopProcess("kubelet")
	n.StopProcess("kube-proxy")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := os.Stat(n.ContainerdSocket()); err == nil {
		if out, err := n.ctr(ctx, "tasks", "ls", "-q"); err == nil {
			for _, t := range strings.Fields(string(out)) {
				_, _ = n.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", t)
			}
			for _, t := range strings.Fields(string(out)) {
				_, _ = n.ctr(ctx, "tasks", "delete", "-f", t)
			}
		}
		if out, err := n.ctr(ctx, "containers", "ls", "-q"); err == nil {
			for _, c := range strings.Fields(string(out)) {
				_, _ = n.ctr(ctx, "containers", "delete", c)
			}
		}
	}
	killCgroupProcs()
	n.StopProcess("containerd")
}

// PauseImage is the node's sandbox image (cmd/pause), built into the tools cache.
func PauseImage(ctx context.Context) (string, error) {
	return tools.BuildImage(ctx, tools.GoImage{Ref: sandboxImage, ModDir: repo.Root(), Pkg: "./internal/realnode/cmd/pause"}, nil)
}

// The node's configuration files (formats of containerd 1.6, the kubelet and kube-proxy v1.34).
const containerdConfig = `version = 2
root = "%s/containerd/root"
state = "%s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "%s"
[ttrpc]
  address = "%s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "%s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%s"
  disable_apparmor = true
  # Root here may lack CAP_SYS_RESOURCE: runc then fails every sandbox writing oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%s"
    conf_dir = "%s"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`

const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "readiness",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s", "gateway": "%s"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "%s"}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
`

// The kubelet: cgroupfs (no systemd here), swap and cgroup v1 tolerated, anonymous and
// AlwaysAllow (its port is inside the cluster's own namespace), no image garbage collection
// (the images made here cannot be pulled again).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
resolvConf: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
address: 0.0.0.0
port: 10250
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enableServer: true
`

// kube-proxy: iptables mode; every conntrack setting 0, so it never writes the host's
// conntrack sysctls.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`
