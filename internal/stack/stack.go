// Package stack runs Pulumi programs through the Automation API (inline programs, so no
// language host is needed) with the built Pulumi CLI, the readiness provider, the real
// pulumi-kubernetes plugin (kubernetes.go), against a local file backend. Controllers are
// played by internal/fakes against the API server, not by a provider. Tests and the demo share it.
package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
)

// Env is a prepared Pulumi environment: binaries built, backend and home folders made.
type Env struct {
	Dir     string
	BinDir  string
	Vars    map[string]string
	command auto.PulumiCommand
}

// Prepare builds the provider binaries into dir/bin and sets up a local backend under dir.
func Prepare(ctx context.Context, dir string) (*Env, error) {
	toolsBin, err := controlplane.EnsureTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, BinDir: filepath.Join(dir, "bin")}
	root := controlplane.RepoRoot()
	for bin, pkg := range map[string]string{
		"pulumi-resource-readiness": "./provider/cmd/pulumi-resource-readiness",
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(e.BinDir, bin), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v\n%s", bin, err, out)
		}
	}
	for _, d := range []string{"state", "home"} {
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
	// Prepare may run twice on one dir (the bench's stack sections): an existing link is kept.
	link := filepath.Join(dir, "home", "plugins")
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
