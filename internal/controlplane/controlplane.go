// Package controlplane runs a local Kubernetes control plane for the tests, the demo and the
// benchmarks: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with its
// fake nodes, as processes on loopback (controlplane.go, kwok.go), and what a test does with
// the running cluster (apply.go, rebuild.go). The binaries come from package tools; a real
// node (containerd, a kubelet) is package realnode's, which runs this control plane inside
// its namespace (Options.Namespace).
package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// Options shape a control plane.
type Options struct {
	// Nodes is how many kwok-managed fake nodes to register: 1 when 0, unless Namespace is set
	// (beside a real node), where 0 is none.
	Nodes int
	// KwokStages, when set, replaces the default kwok configuration (kwok's fast stages, with
	// pod readiness delayed by PodReadyDelayAnnotation).
	KwokStages string
	// Dir is the working folder (data, certificates, logs); a temporary one when empty.
	Dir string
	// Logf receives progress lines (tool builds, start-up).
	Logf func(format string, args ...any)
	// BinDir is the built tools' folder; tools.EnsureTools builds them when empty.
	BinDir string
	// Namespace, when set, runs every process in a network namespace of another's making
	// (package realnode's, with a real node in it) instead of on the machine's loopback.
	Namespace *Namespace
}

// Namespace says how the control plane runs in a network namespace of its own.
type Namespace struct {
	// Enter is the command line that runs bin with args inside the namespace.
	Enter func(bin string, args []string) (string, []string)
	// EtcdPort, EtcdPeerPort and APIPort are fixed: the namespace is the cluster's alone.
	EtcdPort, EtcdPeerPort, APIPort int
	// APIServerArgs are the API server's addresses there (--bind-address, ...).
	APIServerArgs []string
	// Host is the API server's URL from this process (a forwarder into the namespace); the
	// components dial https://127.0.0.1:APIPort inside it.
	Host string
}

// ServiceCIDR is the Services' address range (the API server's --service-cluster-ip-range).
const ServiceCIDR = "10.0.0.0/24"

// ControlPlane is a running etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok on loopback (or in Options.Namespace).
type ControlPlane struct {
	Dir            string
	KubeconfigPath string
	// Kubeconfig is the kubeconfig document (admin token, the API server's CA).
	Kubeconfig []byte
	Config     *rest.Config
	Client     kubernetes.Interface
	Host       string
	// StartTime is how long Start took once the tools were built.
	StartTime time.Duration
	// ComponentKubeconfigPath is the kubeconfig of the cluster's own components (and a real
	// node's): KubeconfigPath, or in a Namespace one that dials the API server inside it.
	ComponentKubeconfigPath string

	binDir       string
	token        string
	etcdURL      string
	apiPort      int
	opts         Options
	ownDir       bool
	mu           sync.Mutex
	procs        map[string]*proc
	apiServerCmd []string
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Start builds the tools if needed and starts a control plane with opts.Nodes ready fake nodes.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Nodes <= 0 && opts.Namespace == nil {
		opts.Nodes = 1
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = tools.EnsureTools(ctx, opts.Logf); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	cp := &ControlPlane{binDir: binDir, opts: opts, procs: map[string]*proc{}, Dir: opts.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "readiness-cp-"); err != nil {
			return nil, err
		}
		cp.ownDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, d := range []string{"etcd", "certs", "logs"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := cp.writeCredentials(); err != nil {
		return nil, err
	}
	apiArgs := []string{"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		// No kubelet: nothing keeps the `kubernetes` Service's endpoints, and nothing needs them.
		"--endpoint-reconciler-type=none"}
	var ports []int
	if ns := opts.Namespace; ns != nil {
		ports, apiArgs = []int{ns.EtcdPort, ns.EtcdPeerPort, ns.APIPort}, ns.APIServerArgs
	} else if ports, err = freePorts(3); err != nil {
		return nil, err
	}
	cp.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	cp.apiPort = ports[2]
	cp.Host = fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort)
	if opts.Namespace != nil {
		cp.Host = opts.Namespace.Host
	}

	if err := cp.StartProcess("etcd", filepath.Join(binDir, "etcd"),
		"--data-dir", filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls", cp.etcdURL, "--advertise-client-urls", cp.etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", ports[1]),
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return nil, err
	}
	cp.apiServerCmd = []string{filepath.Join(binDir, "kube-apiserver"),
		"--etcd-servers=" + cp.etcdURL,
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(cp.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-cluster-ip-range=" + ServiceCIDR,
		"--profiling=false", "-v=1"}
	cp.apiServerCmd = append(cp.apiServerCmd, apiArgs...)
	if err := cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := cp.writeKubeconfig(); err != nil {
		return nil, err
	}
	// The components' own kubeconfig: in a namespace they dial the API server inside it, not
	// the host's forwarder.
	if cp.ComponentKubeconfigPath, err = cp.componentKubeconfig(); err != nil {
		return nil, err
	}
	kc := cp.ComponentKubeconfigPath
	if err := cp.StartProcess("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+kc, "--leader-elect=false",
		"--service-account-private-key-file="+filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file="+filepath.Join(cp.Dir, "certs", "apiserver.crt"),
		"--use-service-account-credentials=false", "--controllers=*,-nodeipam",
		"--secure-port=0", "--concurrent-deployment-syncs=10", "-v=1"); err != nil {
		return nil, err
	}
	if err := cp.StartProcess("kube-scheduler", filepath.Join(binDir, "kube-scheduler"),
		"--kubeconfig="+kc, "--leader-elect=false", "--secure-port=0", "-v=1"); err != nil {
		return nil, err
	}
	if opts.Nodes == 0 {
		cp.StartTime = time.Since(began)
		return cp, nil
	}
	kwokArgs := []string{"--kubeconfig=" + kc, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.1/24", "--node-ip=10.244.0.1"}
	stages := opts.KwokStages
	if stages == "" {
		if stages, err = kwokStages(ctx); err != nil {
			return nil, err
		}
	}
	stagesPath := filepath.Join(cp.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesPath, []byte(stages), 0o644); err != nil {
		return nil, err
	}
	kwokArgs = append(kwokArgs, "--config="+stagesPath)
	if err := cp.StartProcess("kwok", filepath.Join(binDir, "kwok"), kwokArgs...); err != nil {
		return nil, err
	}
	for i := 0; i < opts.Nodes; i++ {
		if err := cp.AddNode(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := cp.waitNodesReady(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	cp.StartTime = time.Since(began)
	return cp, nil
}

// StartAPIServer (re)starts kube-apiserver and waits for /readyz.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if err := cp.StartProcess("kube-apiserver", cp.apiServerCmd[0], cp.apiServerCmd[1:]...); err != nil {
		return err
	}
	return cp.waitReadyz(ctx, 90*time.Second)
}

// StopProcess stops one component (tests use it to restart the API server).
func (cp *ControlPlane) StopProcess(name string) {
	cp.mu.Lock()
	p := cp.procs[name]
	delete(cp.procs, name)
	cp.mu.Unlock()
	if p != nil {
		stopProc(p)
	}
}

// Exited says whether the component started as name has exited (false when none was started).
func (cp *ControlPlane) Exited(name string) bool {
	cp.mu.Lock()
	p := cp.procs[name]
	cp.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// EtcdURL is the etcd client address (tests compact through it).
func (cp *ControlPlane) EtcdURL() string { return cp.etcdURL }

// Stop stops everything Start started and removes its temporary folder.
func (cp *ControlPlane) Stop() {
	for _, name := range []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		cp.StopProcess(name)
	}
	if cp.ownDir && os.Getenv("READINESS_KEEP_CP") == "" {
		_ = os.RemoveAll(cp.Dir)
	}
}

// StartProcess starts bin (in Options.Namespace when set) as the component name, logging to
// Dir/logs/name.log, until StopProcess(name) or Stop.
func (cp *ControlPlane) StartProcess(name, bin string, args ...string) error {
	logPath := filepath.Join(cp.Dir, "logs", name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if cp.opts.Namespace != nil {
		bin, args = cp.opts.Namespace.Enter(bin, args)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Die with the test process, whatever happens to it: nothing is left behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	cp.mu.Lock()
	cp.procs[name] = p
	cp.mu.Unlock()
	return nil
}

func stopProc(p *proc) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// LogTail returns the last lines of a component's log, for error messages.
func (cp *ControlPlane) LogTail(name string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(cp.Dir, "logs", name+".log"))
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (cp *ControlPlane) writeCredentials() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "sa.key"),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "sa.pub"),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	cp.token = hex.EncodeToString(tok)
	return os.WriteFile(filepath.Join(cp.Dir, "tokens.csv"),
		[]byte(cp.token+",admin,admin-uid,system:masters\n"), 0o600)
}

// AddToken registers another static token for user (tests of RBAC run the provider as it).
// The API server reads the token file at start, so call RestartAPIServer afterwards.
func (cp *ControlPlane) AddToken(token, user string) error {
	f, err := os.OpenFile(filepath.Join(cp.Dir, "tokens.csv"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s,%s,%s-uid\n", token, user, user)
	return err
}

// KubeconfigFor returns a kubeconfig document for the given token.
func (cp *ControlPlane) KubeconfigFor(token string) ([]byte, error) {
	ca, err := os.ReadFile(filepath.Join(cp.Dir, "certs", "apiserver.crt"))
	if err != nil {
		return nil, err
	}
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: cp.Host, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"local": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "local", Namespace: "default"}},
		CurrentContext: "local",
	})
}

// componentKubeconfig is the kubeconfig of the cluster's own components: the host's one, or
// in a namespace one that dials the API server inside it.
func (cp *ControlPlane) componentKubeconfig() (string, error) {
	if cp.opts.Namespace == nil {
		return cp.KubeconfigPath, nil
	}
	ca, err := os.ReadFile(filepath.Join(cp.Dir, "certs", "apiserver.crt"))
	if err != nil {
		return "", err
	}
	b, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"local": {
			Server: fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort), CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"local": {Token: cp.token}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "local"}},
		CurrentContext: "local",
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.Dir, "kubeconfig-components")
	return path, os.WriteFile(path, b, 0o600)
}

func (cp *ControlPlane) writeKubeconfig() error {
	b, err := cp.KubeconfigFor(cp.token)
	if err != nil {
		return err
	}
	cp.Kubeconfig = b
	cp.KubeconfigPath = filepath.Join(cp.Dir, "kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, b, 0o600); err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cp.Config = cfg
	cp.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (cp *ControlPlane) waitReadyz(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// The harness's own probe of a server it just started: its certificate is self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.token)
		resp, err := client.Do(req)
		if err == nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, lastLines(buf.String(), 3))
		} else {
			last = err.Error()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond) // the harness polls a server it started; no watch exists yet
	}
	return fmt.Errorf("kube-apiserver not ready after %s: %s\n--- kube-apiserver log ---\n%s\n--- etcd log ---\n%s",
		timeout, last, cp.LogTail("kube-apiserver", 30), cp.LogTail("etcd", 10))
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// AddNode registers a kwok-managed fake node.
func (cp *ControlPlane) AddNode(ctx context.Context, name string) error {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	capacity := corev1.ResourceList{corev1.ResourceCPU: q("32"), corev1.ResourceMemory: q("256Gi"), corev1.ResourcePods: q("250")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name,
				"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	return err
}

func (cp *ControlPlane) waitNodesReady(ctx context.Context, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, nd := range nodes.Items {
				for _, c := range nd.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond) // harness start-up only
	}
	return fmt.Errorf("kwok nodes not ready after 60s\n--- kwok log ---\n%s", cp.LogTail("kwok", 20))
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
