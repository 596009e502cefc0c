// Package stack runs Pulumi programs through the Automation API (inline programs, so no
// language host is needed) with the built Pulumi CLI, the readiness provider, the real
// pulumi-kubernetes plugin (kubernetes.go), against a local file backend. Controllers are
// played by internal/fakes against the API server, not by a provider. Tests and the demo share it.
package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// Env is a prepared Pulumi environment: binaries built, backend and home folders made.
type Env struct {
	Dir     string
	BinDir  string
	Vars    map[string]string
	command auto.PulumiCommand
}

// Prepare puts the provider binary into dir/bin and sets up a local backend under dir.
func Prepare(ctx context.Context, dir string) (*Env, error) {
	toolsBin, err := tools.EnsureTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, BinDir: filepath.Join(dir, "bin")}
	provider, err := providerBinary(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.BinDir, 0o755); err != nil {
		return nil, err
	}
	// Prepare may run twice on one dir (the bench's stack sections): the link is made again.
	link := filepath.Join(e.BinDir, "pulumi-resource-readiness")
	_ = os.Remove(link)
	if err := os.Symlink(provider, link); err != nil {
		return nil, err
	}
	for _, d := range []string{"state", "home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// pulumi-kubernetes, installed once into the project's PULUMI_HOME; each environment's own
	// home sees that plugins folder (175 MB is not copied per test).
	shared := k8splugin.ProjectHome()
	if err := k8splugin.Install(ctx, filepath.Join(toolsBin, "pulumi"), shared, nil); err != nil {
		return nil, err
	}
	// An existing link is kept (Prepare may run twice on one dir).
	link = filepath.Join(dir, "home", "plugins")
	if target, err := os.Readlink(link); err != nil || target != filepath.Join(shared, "plugins") {
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(shared, "plugins"), link); err != nil {
			return nil, err
		}
	}
	e.Vars = map[string]string{
		// Plugins are found as ambient binaries on PATH: ours first.
		"PATH":                                 e.BinDir + string(os.PathListSeparator) + toolsBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_BACKEND_URL":                   "file://" + filepath.Join(dir, "state"),
		"PULUMI_CONFIG_PASSPHRASE":             "readiness-local-only",
		"PULUMI_HOME":                          filepath.Join(dir, "home"),
		"PULUMI_SKIP_UPDATE_CHECK":             "true",
		"PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
		// A plugin missing here must fail the test, never be fetched from the internet.
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		// pulumi-kubernetes writes the kubeconfig it is given to a new temporary file at each
		// configure and never removes it: the Pulumi processes' temporary files stay in this
		// environment's folder, and go with it.
		"TMPDIR": filepath.Join(dir, "tmp"),
	}
	e.command, err = auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(toolsBin), SkipVersionCheck: true})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Stack creates (or selects) an inline-program stack whose providers use kubeconfig.
func (e *Env) Stack(ctx context.Context, project, name, kubeconfig string, program pulumi.RunFunc) (auto.Stack, error) {
	work := filepath.Join(e.Dir, "work-"+project+"-"+name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return auto.Stack{}, err
	}
	s, err := auto.UpsertStackInlineSource(ctx, name, project, program,
		auto.EnvVars(e.Vars), auto.Pulumi(e.command), auto.WorkDir(work))
	if err != nil {
		return s, err
	}
	for _, key := range []string{"readiness:kubeconfig", "kubernetes:kubeconfig"} {
		if err := s.SetConfig(ctx, key, auto.ConfigValue{Value: kubeconfig, Secret: true}); err != nil {
			return s, err
		}
	}
	return s, nil
}

// providerBuild is this process's build of the provider: one per process, not one per test
// (a 113 MB link, seconds of CPU each time).
var providerBuild struct {
	once sync.Once
	path string
	err  error
}

// providerBinary builds the provider once per process into a folder of this checkout's own
// under the temp folder, shared by every process of the checkout (the TypeScript harness builds
// into the same place). A file lock keeps two processes from writing it at once; `go build`
// leaves an up-to-date binary untouched, so a process that finds it built pays no link.
func providerBinary(ctx context.Context) (string, error) {
	providerBuild.once.Do(func() {
		root := repo.Root()
		sum := sha256.Sum256([]byte(root))
		dir := filepath.Join(os.TempDir(), "readiness-provider-bin-"+hex.EncodeToString(sum[:])[:12])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			providerBuild.err = err
			return
		}
		lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			providerBuild.err = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			providerBuild.err = err
			return
		}
		defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
		out := filepath.Join(dir, "pulumi-resource-readiness")
		// Not the caller's ctx alone: the build is every later caller's too, so one caller's
		// cancel must not stick; a build that hangs still ends with the test binary.
		cmd := exec.CommandContext(context.WithoutCancel(ctx), "go", "build", "-o", out, "./provider/cmd/pulumi-resource-readiness")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			providerBuild.err = fmt.Errorf("building pulumi-resource-readiness: %v\n%s", err, b)
			return
		}
		providerBuild.path = out
	})
	return providerBuild.path, providerBuild.err
}
