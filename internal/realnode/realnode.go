// Package realnode runs a real node beside a control plane (package controlplane): containerd,
// runc, a kubelet and kube-proxy, with the control plane, all inside a network and mount
// namespace of the cluster's own. Pods really start, mount Secrets, pass probes and sit behind
// Services routed by kube-proxy; nothing in the namespace can reach anything but itself. The
// recipe, and every trap it met, is ../shared/realnode/README.md.
//
// The layout inside the namespace (namespace.go):
//   - lo, and a bridge cni0 at nodeIP/24: the node's address and the pods' gateway;
//   - the Service range routed to cni0, so the API server's calls to a webhook's ClusterIP
//     go through kube-proxy's rules;
//   - etcd and the API server on fixed ports (the namespace is the cluster's alone); the host
//     reaches the API server through a forwarder on 127.0.0.1 (forward.go).
//
// One real node per machine: the kubelet's cgroups (kubepods) and host sysctls are
// machine-wide, so a lock file keeps a second one waiting.
package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

const (
	// NodeName is the real node's name.
	NodeName = "readiness-node"
	// nodeIP is the node's address on the pods' bridge; the API server advertises it, so
	// pods reach the `kubernetes` Service through it.
	nodeIP  = "10.244.0.1"
	podCIDR = "10.244.0.0/24"
	// kubernetesServiceIP is the `kubernetes` Service's address (the first of
	// controlplane.ServiceCIDR).
	kubernetesServiceIP = "10.0.0.1"
	nsAPIPort           = 6443
	nsEtcdPort          = 2379
	nsPeerPort          = 2380
	sandboxImage        = "readiness.local/pause:1"
)

// Node is a control plane with a real node, both in the node's namespace. The control plane's
// methods (Client, Apply, ...) are the cluster's; Stop stops the node and the control plane.
type Node struct {
	*controlplane.ControlPlane

	dir string // the cluster's folder (the control plane's Dir)
	// runtime are containerd's and the kubelet's command lines (RestartRuntime starts them again).
	runtime map[string][]string
	ownDir  bool
	binDir  string
	ns      *namespace // nil once stopped
}

// Requirements lists what a real node needs from the machine and is missing ("" when
// nothing is): root, and Debian's containerd, runc, iptables and containernetworking-plugins.
func Requirements() string {
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

// Start builds the tools if needed (with the kubelet and kube-proxy) and starts, in a network
// namespace of its own, a control plane with opts (no kwok node unless opts.Nodes asks for
// some) and a real node (NodeName) joined to it; images come from LoadImage. Needs root and
// Debian's containerd, runc, iptables and containernetworking-plugins (Requirements). The
// control plane's StartTime covers the node's start too.
func Start(ctx context.Context, opts controlplane.Options) (_ *Node, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	binDir, err := tools.EnsureNodeTools(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	n := &Node{dir: opts.Dir, binDir: binDir}
	if n.dir == "" {
		if n.dir, err = os.MkdirTemp("", "readiness-cp-"); err != nil {
			return nil, err
		}
		n.ownDir = true
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	for _, d := range []string{"certs", "logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.startNamespace(ctx); err != nil {
		return nil, err
	}
	if err := writeServingCert(filepath.Join(n.dir, "certs")); err != nil {
		return nil, err
	}
	fwd, err := newForwarder(n.NetnsPath(), fmt.Sprintf("127.0.0.1:%d", nsAPIPort))
	if err != nil {
		return nil, fmt.Errorf("forwarding the API server to the host: %w", err)
	}
	n.ns.fwd = fwd
	opts.Dir, opts.BinDir = n.dir, binDir
	opts.Namespace = &controlplane.Namespace{
		Enter:    n.enter,
		EtcdPort: nsEtcdPort, EtcdPeerPort: nsPeerPort, APIPort: nsAPIPort,
		// The namespace is the cluster's alone: the API server on the pods' bridge too (pods
		// reach it through the `kubernetes` Service).
		APIServerArgs: []string{"--bind-address=0.0.0.0", "--advertise-address=" + nodeIP,
			// exec and logs dial the node's address, never its name (the host's resolver).
			"--kubelet-preferred-address-types=InternalIP"},
		Host: "https://" + fwd.Addr(),
	}
	if n.ControlPlane, err = controlplane.Start(ctx, opts); err != nil {
		return nil, err
	}
	if err := n.startNode(ctx); err != nil {
		return nil, err
	}
	n.StartTime = time.Since(began)
	return n, nil
}

// Stop takes down the node, then the control plane, then the namespace, gives the host back
// what the node changed and removes the cluster's temporary folder.
func (n *Node) Stop() {
	if n.ControlPlane != nil {
		n.stopComponents()
		n.ControlPlane.Stop()
	}
	n.stopNamespace()
	if n.ownDir && os.Getenv("READINESS_KEEP_CP") == "" {
		_ = os.RemoveAll(n.dir)
	}
}

// enter is how a component is started inside the node's namespace.
func (n *Node) enter(bin string, args []string) (string, []string) {
	return "nsenter", append([]string{"-t", strconv.Itoa(n.ns.anchor.Process.Pid), "-n", "-m", "--", bin}, args...)
}

// NetnsPath is the node's network namespace: tests enter it to reach a pod or a ClusterIP.
func (n *Node) NetnsPath() string {
	if n.ns == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/net", n.ns.anchor.Process.Pid)
}
