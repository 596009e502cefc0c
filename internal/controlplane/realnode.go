package controlplane

// A real node: containerd, runc, a kubelet and kube-proxy, with the control plane, all inside a
// network and mount namespace of the cluster's own. Pods really start, mount Secrets, pass
// probes and sit behind Services routed by kube-proxy; nothing in the namespace can reach
// anything but itself. The recipe, and every trap it met, is ../shared/realnode/README.md.
//
// The layout inside the namespace:
//   - lo, and a bridge cni0 at nodeIP/24: the node's address and the pods' gateway;
//   - the Service range routed to cni0, so the API server's calls to a webhook's ClusterIP
//     go through kube-proxy's rules;
//   - etcd and the API server on fixed ports (the namespace is the cluster's alone); the host
//     reaches the API server through a forwarder on 127.0.0.1 (forward.go).
//
// One real node per machine: the kubelet's cgroups (kubepods) and host sysctls are
// machine-wide, so a lock file keeps a second one waiting.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

const (
	// NodeName is the real node's name.
	NodeName = "readiness-node"
	// nodeIP is the node's address on the pods' bridge; the API server advertises it, so
	// pods reach the `kubernetes` Service through it.
	nodeIP      = "10.244.0.1"
	podCIDR     = "10.244.0.0/24"
	serviceCIDR = "10.0.0.0/24"
	// kubernetesServiceIP is the `kubernetes` Service's address (the range's first).
	kubernetesServiceIP = "10.0.0.1"
	nsAPIPort           = 6443
	nsEtcdPort          = 2379
	nsPeerPort          = 2380
	sandboxImage        = "readiness.local/pause:1"
)

// hostPaths are folders the node's components hard-code whatever their flags say (shim
// sockets and runc's root, pod logs, the device-plugin socket, libcni's cache): each gets a
// private tmpfs inside the namespace, so nothing lands on the host.
var hostPaths = []string{"/run/containerd", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni"}

// kubeletSysctls are host-wide settings the kubelet changes while it runs: saved at start and
// put back at stop.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "vm/panic_on_oom"}

// nodeHost is what a real node adds to a control plane.
type nodeHost struct {
	anchor      *exec.Cmd // sleeps in the namespace; every component enters through it
	anchorDone  chan struct{}
	lock        *os.File
	sysctls     map[string]string
	createdDirs []string
	fwd         *forwarder
}

// NodeRequirements lists what a real node needs from the machine and is missing ("" when
// nothing is): root, and Debian's containerd, runc, iptables and containernetworking-plugins.
func NodeRequirements() string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, "CNI plugin "+p+" (containernetworking-plugins)")
		}
	}
	return strings.Join(missing, ", ")
}

const cniBinDir = "/usr/lib/cni"

// startNamespace takes the machine's node lock, saves what the kubelet changes on the host and
// starts the anchor: a process in a new network and mount namespace that sets both up (mounts,
// bridge, routes) and then sleeps.
func (cp *ControlPlane) startNamespace(ctx context.Context) error {
	if m := NodeRequirements(); m != "" {
		return fmt.Errorf("a real node needs: %s (apt-get install containerd runc iptables containernetworking-plugins)", m)
	}
	// Before the machine's node lock: a disk too full is said at once, not after a wait.
	if err := checkNodeDisk(cp.Dir); err != nil {
		return err
	}
	n := &nodeHost{sysctls: map[string]string{}}
	cp.node = n
	lockPath := filepath.Join(os.TempDir(), "readiness-realnode.lock")
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	n.lock = f
	if err := tools.Lock(ctx, f); err != nil {
		return fmt.Errorf("waiting for the machine's real node lock %s: %w", lockPath, err)
	}
	recoverCrashedNode()
	var saved strings.Builder
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil {
			n.sysctls[k] = strings.TrimSpace(string(b))
			fmt.Fprintf(&saved, "%s %s\n", k, n.sysctls[k])
		}
	}
	// Kept until Stop has put them back: a node whose test process was killed (a test
	// timeout) never reaches Stop, and the next node puts them back first.
	if err := os.WriteFile(sysctlStateFile(), []byte(saved.String()), 0o644); err != nil {
		return err
	}
	for _, d := range hostPaths {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			n.createdDirs = append(n.createdDirs, d)
		}
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s %s\n", nodeIP, NodeName)
	if err := os.WriteFile(filepath.Join(cp.Dir, "hosts"), []byte(hosts), 0o644); err != nil {
		return err
	}
	ready := filepath.Join(cp.Dir, "ns-ready")
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range hostPaths {
		fmt.Fprintf(&script, "mount -t tmpfs tmpfs %s\n", d)
	}
	// No process may even ask the host's resolver (an address outside 127/8).
	fmt.Fprintf(&script, "mount --bind %s /etc/resolv.conf\nmount --bind %s /etc/hosts\n",
		filepath.Join(cp.Dir, "resolv.conf"), filepath.Join(cp.Dir, "hosts"))
	fmt.Fprintf(&script, `ip link set lo up
ip link add cni0 type bridge
ip addr add %s/24 dev cni0
ip link set cni0 up
ip route add %s dev cni0
echo 1 > /proc/sys/net/ipv4/ip_forward
[ -e /proc/sys/net/bridge ] || modprobe br_netfilter
echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
touch %s
exec sleep infinity
`, nodeIP, serviceCIDR, ready)
	logPath := filepath.Join(cp.Dir, "logs", "namespace.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	n.anchor = exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script.String())
	n.anchor.Stdout, n.anchor.Stderr = logf, logf
	n.anchor.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := n.anchor.Start(); err != nil {
		logf.Close()
		return err
	}
	n.anchorDone = make(chan struct{})
	go func() { _ = n.anchor.Wait(); logf.Close(); close(n.anchorDone) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-n.anchorDone:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("setting up the node's namespace failed: %s", strings.TrimSpace(string(b)))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // a file the anchor's shell writes; no watch for it
		}
		if time.Now().After(deadline) {
			return errors.New("the node's namespace was not set up after 20s")
		}
	}
	return nil
}

// writeServingCert gives the API server a self-signed certificate for every address it is
// dialed at: 127.0.0.1 (the host's forwarder, and the components inside the namespace), the
// node's address, and the `kubernetes` Service (pods). Left to itself, the API server's own
// covers only the advertised address and the Service. It finds the files in its --cert-dir.
func (cp *ControlPlane) writeServingCert() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		IsCA:         true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP(kubernetesServiceIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	certs := filepath.Join(cp.Dir, "certs")
	if err := os.WriteFile(filepath.Join(certs, "apiserver.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(certs, "apiserver.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// inNamespace is how a component is started inside the node's namespace.
func (cp *ControlPlane) inNamespace(bin string, args []string) (string, []string) {
	if cp.node == nil {
		return bin, args
	}
	return "nsenter", append([]string{"-t", strconv.Itoa(cp.node.anchor.Process.Pid), "-n", "-m", "--", bin}, args...)
}

// NetnsPath is the node's network namespace ("" without a real node): tests enter it to reach
// a pod or a ClusterIP.
func (cp *ControlPlane) NetnsPath() string {
	if cp.node == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/net", cp.node.anchor.Process.Pid)
}

// startNode starts containerd, loads the pause image, and starts the kubelet and kube-proxy,
// then waits for the node to be Ready.
func (cp *ControlPlane) startNode(ctx context.Context, nodeKubeconfig string) error {
	st := filepath.Join(cp.Dir, "node")
	for _, d := range []string{st, filepath.Join(st, "net.d"), filepath.Join(st, "kubelet")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sock := cp.ContainerdSocket()
	files := map[string]string{
		"containerd.toml":             fmt.Sprintf(containerdConfig, st, st, sock, sock, st, sandboxImage, cniBinDir, filepath.Join(st, "net.d")),
		"net.d/10-readiness.conflist": fmt.Sprintf(cniConfig, podCIDR, nodeIP, filepath.Join(st, "cni-ipam")),
		"kubelet.yaml":                fmt.Sprintf(kubeletConfig, sock, sock, filepath.Join(cp.Dir, "resolv.conf")),
		"kube-proxy.yaml":             fmt.Sprintf(kubeProxyConfig, nodeKubeconfig, NodeName, podCIDR, nodeIP),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(st, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := cp.run("containerd", "containerd", "--config", filepath.Join(st, "containerd.toml")); err != nil {
		return err
	}
	if err := cp.waitContainerd(ctx); err != nil {
		return err
	}
	pause, err := PauseImage(ctx)
	if err != nil {
		return err
	}
	if err := cp.LoadImage(ctx, pause); err != nil {
		return err
	}
	if err := cp.run("kubelet", filepath.Join(cp.binDir, "kubelet"),
		"--config="+filepath.Join(st, "kubelet.yaml"), "--kubeconfig="+nodeKubeconfig,
		"--root-dir="+filepath.Join(st, "kubelet"), "--cert-dir="+filepath.Join(st, "kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+nodeIP, "-v=1"); err != nil {
		return err
	}
	if err := cp.run("kube-proxy", filepath.Join(cp.binDir, "kube-proxy"),
		"--config="+filepath.Join(st, "kube-proxy.yaml"), "-v=1"); err != nil {
		return err
	}
	return cp.waitRealNodeReady(ctx)
}

// ContainerdSocket is the real node's containerd socket (its path is reachable from the host).
func (cp *ControlPlane) ContainerdSocket() string {
	return filepath.Join(cp.Dir, "node", "containerd.sock")
}

func (cp *ControlPlane) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", cp.ContainerdSocket(), "-n", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

func (cp *ControlPlane) waitContainerd(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(cp.ContainerdSocket()); err == nil {
			if _, err := cp.ctr(ctx, "version"); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond) // start-up of a daemon we started; it has no event to watch
	}
	return fmt.Errorf("containerd not up after 30s\n--- containerd log ---\n%s", cp.LogTail("containerd", 20))
}

// LoadImage imports an image archive (docker-archive or OCI tar, as images.Build writes) into
// the real node's containerd, as `kind load image-archive` does: pods then start it without a
// pull (imagePullPolicy IfNotPresent, the charts' default for tagged images).
func (cp *ControlPlane) LoadImage(ctx context.Context, tarPath string) error {
	if cp.node == nil {
		return errors.New("LoadImage needs a real node (Options.RealNode)")
	}
	if b, err := cp.ctr(ctx, "images", "import", "--no-unpack=false", tarPath); err != nil {
		return fmt.Errorf("loading %s into the node: %v: %s", filepath.Base(tarPath), err, b)
	}
	return nil
}

func (cp *ControlPlane) waitRealNodeReady(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		nd, err := cp.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
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
		NodeName, cp.LogTail("kubelet", 30), cp.LogTail("containerd", 10))
}

// NodePressure says whether the real node was ever short of disk, memory or PIDs while it ran:
// the pressure conditions that hold now and the kubelet's events of one (EvictionThresholdMet,
// NodeHasDiskPressure, ...), with the disk's free space; "" when there were none. A node under
// pressure can be Ready and admit no pod: this tells a test whose pods never started whether
// the node took them at all.
func (cp *ControlPlane) NodePressure(ctx context.Context) string {
	if cp.node == nil {
		return ""
	}
	var parts []string
	if nd, err := cp.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err != nil {
		parts = append(parts, fmt.Sprintf("reading node %s: %v", NodeName, err))
	} else if p := nodePressure(nd); p != "" {
		parts = append(parts, "now: "+p)
	}
	evs, err := cp.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
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
	if err := checkNodeDisk(filepath.Join(cp.Dir, "node")); err != nil {
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "\n")
}

// stopNode takes down, in order, what startNode and startNamespace started: the kubelet and
// kube-proxy (so nothing restarts a container), the containers through containerd, any
// process left in the kubepods cgroups, containerd; then (after the control plane stopped)
// every process left in the namespace, the anchor, the kubelet's cgroups and host sysctls.
func (cp *ControlPlane) stopNodeComponents() {
	if cp.node == nil {
		return
	}
	cp.StopProcess("kubelet")
	cp.StopProcess("kube-proxy")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := os.Stat(cp.ContainerdSocket()); err == nil {
		if out, err := cp.ctr(ctx, "tasks", "ls", "-q"); err == nil {
			for _, t := range strings.Fields(string(out)) {
				_, _ = cp.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", t)
			}
			for _, t := range strings.Fields(string(out)) {
				_, _ = cp.ctr(ctx, "tasks", "delete", "-f", t)
			}
		}
		if out, err := cp.ctr(ctx, "containers", "ls", "-q"); err == nil {
			for _, c := range strings.Fields(string(out)) {
				_, _ = cp.ctr(ctx, "containers", "delete", c)
			}
		}
	}
	killCgroupProcs()
	cp.StopProcess("containerd")
}

// stopNamespace ends the namespace and gives the host back what the node changed.
func (cp *ControlPlane) stopNamespace() {
	n := cp.node
	if n == nil {
		return
	}
	if n.fwd != nil {
		n.fwd.Close()
	}
	if n.anchor != nil && n.anchor.Process != nil {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", n.anchor.Process.Pid))
		emptyNamespace(ns, n.anchor.Process.Pid)
		_ = syscall.Kill(-n.anchor.Process.Pid, syscall.SIGKILL)
		<-n.anchorDone
		// What the anchor's group held is killed but may still be exiting: a process stays in
		// the namespace until the kernel has torn it down, so wait for the namespace to empty.
		emptyNamespace(ns, -1)
	}
	removeKubepodsCgroups()
	for k, v := range n.sysctls {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
	}
	_ = os.Remove(sysctlStateFile())
	for _, d := range n.createdDirs {
		_ = os.Remove(d)
	}
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
	}
	cp.node = nil
}

func sysctlStateFile() string { return filepath.Join(os.TempDir(), "readiness-realnode.sysctls") }

// recoverCrashedNode gives the host back what a node left behind when its process died
// before Stop (the caller holds the machine's node lock, so no node is running): the
// sysctls it saved, and the containers still running in the kubelet's cgroups.
func recoverCrashedNode() {
	if b, err := os.ReadFile(sysctlStateFile()); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, " "); ok {
				_ = os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
			}
		}
		_ = os.Remove(sysctlStateFile())
	}
	killCgroupProcs()
	removeKubepodsCgroups()
}

// emptyNamespace kills every process in the network namespace ns but the anchor, again until
// none is left (at most 5 s).
func emptyNamespace(ns string, anchor int) {
	for i := 0; i < 50; i++ {
		left := processesIn(ns, anchor)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond) // the kernel reaps them; no event to wait on
	}
}

// processesIn lists the processes whose network namespace is ns, but the anchor.
func processesIn(ns string, anchor int) []int {
	if ns == "" {
		return nil
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == anchor || pid == os.Getpid() {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killCgroupProcs kills every process still in a kubepods cgroup (containers whose shim died).
func killCgroupProcs() {
	for _, h := range kubepodsRoots() {
		_ = filepath.Walk(h, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeKubepodsCgroups removes the kubelet's cgroups, deepest first.
func removeKubepodsCgroups() {
	for _, h := range kubepodsRoots() {
		var dirs []string
		_ = filepath.Walk(h, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func kubepodsRoots() []string {
	var roots []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods", "/sys/fs/cgroup/kubepods"} {
		m, _ := filepath.Glob(pattern)
		roots = append(roots, m...)
	}
	return roots
}

// PauseImage is the node's sandbox image (cmd/pause).
func PauseImage(ctx context.Context) (string, error) {
	return tools.BuildImage(ctx, tools.GoImage{Ref: sandboxImage, ModDir: repo.Root(), Pkg: "./internal/controlplane/cmd/pause"}, nil)
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
