package realnode

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

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// hostPaths are folders the node's components hard-code whatever their flags say (shim
// sockets and runc's root, pod logs, the device-plugin socket, libcni's cache): each gets a
// private tmpfs inside the namespace, so nothing lands on the host.
var hostPaths = []string{"/run/containerd", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni"}

// kubeletSysctls are host-wide settings the kubelet changes while it runs: saved at start and
// put back at stop.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "vm/panic_on_oom"}

// namespace is the node's network and mount namespace, and what the node changed on the host.
type namespace struct {
	anchor      *exec.Cmd // sleeps in the namespace; every component enters through it
	anchorDone  chan struct{}
	lock        *os.File
	sysctls     map[string]string
	createdDirs []string
	fwd         *forwarder
}

// startNamespace takes the machine's node lock, saves what the kubelet changes on the host and
// starts the anchor: a process in a new network and mount namespace that sets both up (mounts,
// bridge, routes) and then sleeps.
func (n *Node) startNamespace(ctx context.Context) error {
	if m := Requirements(); m != "" {
		return fmt.Errorf("a real node needs: %s (apt-get install containerd runc iptables containernetworking-plugins)", m)
	}
	// Before the machine's node lock: a disk too full is said at once, not after a wait.
	if err := checkNodeDisk(n.dir); err != nil {
		return err
	}
	ns := &namespace{sysctls: map[string]string{}}
	n.ns = ns
	lockPath := filepath.Join(os.TempDir(), "readiness-realnode.lock")
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	ns.lock = f
	if err := tools.Lock(ctx, f); err != nil {
		return fmt.Errorf("waiting for the machine's real node lock %s: %w", lockPath, err)
	}
	recoverCrashedNode()
	var saved strings.Builder
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil {
			ns.sysctls[k] = strings.TrimSpace(string(b))
			fmt.Fprintf(&saved, "%s %s\n", k, ns.sysctls[k])
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
			ns.createdDirs = append(ns.createdDirs, d)
		}
	}
	if err := os.WriteFile(filepath.Join(n.dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s %s\n", nodeIP, NodeName)
	if err := os.WriteFile(filepath.Join(n.dir, "hosts"), []byte(hosts), 0o644); err != nil {
		return err
	}
	ready := filepath.Join(n.dir, "ns-ready")
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range hostPaths {
		fmt.Fprintf(&script, "mount -t tmpfs tmpfs %s\n", d)
	}
	// No process may even ask the host's resolver (an address outside 127/8).
	fmt.Fprintf(&script, "mount --bind %s /etc/resolv.conf\nmount --bind %s /etc/hosts\n",
		filepath.Join(n.dir, "resolv.conf"), filepath.Join(n.dir, "hosts"))
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
`, nodeIP, controlplane.ServiceCIDR, ready)
	logPath := filepath.Join(n.dir, "logs", "namespace.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	ns.anchor = exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script.String())
	ns.anchor.Stdout, ns.anchor.Stderr = logf, logf
	ns.anchor.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := ns.anchor.Start(); err != nil {
		logf.Close()
		return err
	}
	ns.anchorDone = make(chan struct{})
	go func() { _ = ns.anchor.Wait(); logf.Close(); close(ns.anchorDone) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-ns.anchorDone:
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
// covers only the advertised address and the Service. It finds the files in its --cert-dir, certs.
func writeServingCert(certs string) error {
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
	if err := os.WriteFile(filepath.Join(certs, "apiserver.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(certs, "apiserver.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// stopNamespace ends the namespace and gives the host back what the node changed.
func (n *Node) stopNamespace() {
	ns := n.ns
	if ns == nil {
		return
	}
	if ns.fwd != nil {
		ns.fwd.Close()
	}
	if ns.anchor != nil && ns.anchor.Process != nil {
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", ns.anchor.Process.Pid))
		emptyNamespace(link, ns.anchor.Process.Pid)
		_ = syscall.Kill(-ns.anchor.Process.Pid, syscall.SIGKILL)
		<-ns.anchorDone
		// What the anchor's group held is killed but may still be exiting: a process stays in
		// the namespace until the kernel has torn it down, so wait for the namespace to empty.
		emptyNamespace(link, -1)
	}
	removeKubepodsCgroups()
	for k, v := range ns.sysctls {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
	}
	_ = os.Remove(sysctlStateFile())
	for _, d := range ns.createdDirs {
		_ = os.Remove(d)
	}
	if ns.lock != nil {
		_ = syscall.Flock(int(ns.lock.Fd()), syscall.LOCK_UN)
		ns.lock.Close()
	}
	n.ns = nil
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
