// Package tools builds and fetches what this repository pins as Go modules for its tests, the
// demo and the benchmarks: the tools (etcd, the Kubernetes binaries, kwok, the Pulumi CLI),
// built once into a cache folder, some with a dependency trimmed; container images made from
// Go main packages; and pinned modules' sources (their CRDs and charts, kwok's stages).
package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
)

// tool is one binary built from a pinned tools module under tools/.
type tool struct {
	module  string // folder under tools/
	name    string // binary name
	pkg     string // Go package to build
	ldflags string
	node    bool // only for a real node (EnsureNodeTools): kwok-only runs never pay for it
}

var tools = []tool{
	{module: "etcd", name: "etcd", pkg: "go.etcd.io/etcd/server/v3"},
	{module: "kube", name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", ldflags: kubeVersion},
	{module: "kube", name: "kube-controller-manager", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", ldflags: kubeVersion},
	{module: "kube", name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", ldflags: kubeVersion},
	{module: "kube", name: "kubelet", pkg: "k8s.io/kubernetes/cmd/kubelet", node: true, ldflags: kubeVersion},
	{module: "kube", name: "kube-proxy", pkg: "k8s.io/kubernetes/cmd/kube-proxy", node: true, ldflags: kubeVersion},
	{module: "kube", name: "kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok"},
	{module: "pulumi", name: "pulumi", pkg: "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
		ldflags: "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v3.259.0"},
	{module: "pulumi", name: "sdkgen", pkg: "./sdkgen"},
}

// kubeVersion stamps the Kubernetes binaries' version (built from a module, they say
// v0.0.0-master): the kubelet reports it in the Node's status, the API server in /version.
const kubeVersion = "-X k8s.io/component-base/version.gitVersion=v1.34.2 " +
	"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34"

// CacheDir is where built tools live: $READINESS_TOOLS_CACHE, else the user cache folder.
// It survives fresh clones on the same machine, so only a cold machine pays for the builds.
func CacheDir() string {
	if d := os.Getenv("READINESS_TOOLS_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "pulumi-readiness", "tools")
	}
	return filepath.Join(os.TempDir(), "pulumi-readiness-tools")
}

// Tool returns the path of a built tool, building every pinned tool first if needed.
func Tool(ctx context.Context, name string) (string, error) {
	dir, err := EnsureTools(ctx, nil)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// EnsureTools builds any missing tool and returns the folder holding all of them. Builds are
// keyed on each tools module's go.mod/go.sum (and sources, for our own generator), so a pin
// change rebuilds; a file lock lets parallel test packages share one build.
//
// On a cold machine this is the longest step before any test runs, so each tools module's stale
// binaries are built by one `go build` (the three Kubernetes binaries share most packages and
// link side by side) and the modules build at the same time (one module's downloads and links
// overlap another's compiles).
func EnsureTools(ctx context.Context, logf func(string, ...any)) (string, error) {
	return ensureTools(ctx, logf, false)
}

// EnsureNodeTools is EnsureTools plus what a real node runs (kubelet, kube-proxy).
func EnsureNodeTools(ctx context.Context, logf func(string, ...any)) (string, error) {
	return ensureTools(ctx, logf, true)
}

func ensureTools(ctx context.Context, logf func(string, ...any), node bool) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root := repo.Root()
	cache := CacheDir()
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck

	stale := map[string][]staleTool{} // by module
	var modules []string
	for _, t := range tools {
		if t.node && !node {
			continue
		}
		stamp, err := moduleStamp(filepath.Join(root, "tools", t.module), t)
		if err != nil {
			return "", err
		}
		out := filepath.Join(binDir, t.name)
		if b, err := os.ReadFile(out + ".stamp"); err == nil && string(b) == stamp {
			if _, err := os.Stat(out); err == nil {
				continue
			}
		}
		if stale[t.module] == nil {
			modules = append(modules, t.module)
		}
		stale[t.module] = append(stale[t.module], staleTool{t, stamp})
	}
	errs := make(chan error, len(modules))
	for _, m := range modules {
		go func() { errs <- buildModuleTools(ctx, filepath.Join(root, "tools", m), binDir, stale[m], logf) }()
	}
	var first error
	for range modules {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return "", first
	}
	return binDir, nil
}

// staleTool is a tool to build and the stamp its binary gets once built.
type staleTool struct {
	tool
	stamp string
}

// buildModuleTools builds ts, all from the tools module in modDir, into binDir with one `go
// build` (into a scratch folder, then renamed into place with their stamps).
func buildModuleTools(ctx context.Context, modDir, binDir string, ts []staleTool, logf func(string, ...any)) error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	logf("building %s (tools/%s) into %s ...", strings.Join(names, ", "), filepath.Base(modDir), binDir)
	start := time.Now()
	scratch, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	// One ldflags for the whole build: -X of a variable only touches the binaries that have it.
	// -s -w: no symbol table or DWARF (a third of each link's time; panics still show stacks).
	ldflags := "-s -w"
	for _, t := range ts {
		if t.ldflags != "" {
			ldflags += " " + t.ldflags
			break
		}
	}
	args := []string{"build", "-o", scratch + string(filepath.Separator), "-ldflags", ldflags}
	if trim := moduleTrims[filepath.Base(modDir)]; trim != nil {
		modfile, err := TrimModule(ctx, modDir, trim, scratch)
		if err != nil {
			return fmt.Errorf("tools/%s: %w", filepath.Base(modDir), err)
		}
		args = append(args, "-modfile", modfile)
	}
	for _, t := range ts {
		args = append(args, t.pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", strings.Join(names, ", "), err, b)
	}
	for _, t := range ts {
		built := filepath.Join(scratch, binaryName(t.pkg))
		out := filepath.Join(binDir, t.name)
		if err := os.Rename(built, out); err != nil {
			return err
		}
		if err := os.WriteFile(out+".stamp", []byte(t.stamp), 0o644); err != nil {
			return err
		}
	}
	logf("built %s in %s", strings.Join(names, ", "), time.Since(start).Round(time.Second))
	return nil
}

// binaryName is the file `go build -o DIR/` writes for a main package: its last path element,
// or the one before a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
func binaryName(pkg string) string {
	elems := strings.Split(strings.TrimSuffix(pkg, "/"), "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = elems[len(elems)-2]
	}
	return last
}

// moduleStamp hashes what decides a tool's build: its module's go.mod and go.sum, and for our
// own sources (a package path starting with ".") the files of that package.
func moduleStamp(modDir string, t tool) (string, error) {
	h := sha256.New()
	files := []string{"go.mod", "go.sum"}
	if t.pkg[0] == '.' {
		matches, _ := filepath.Glob(filepath.Join(modDir, t.pkg, "*.go"))
		for _, m := range matches {
			rel, _ := filepath.Rel(modDir, m)
			files = append(files, rel)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return "", fmt.Errorf("tools module %s: %w", modDir, err)
		}
		h.Write([]byte(f))
		h.Write(b)
	}
	h.Write([]byte(t.pkg + " -s -w " + t.ldflags + runtime.Version()))
	if trim := moduleTrims[t.module]; trim != nil {
		trim.stamp(h)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
