package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	modpath "golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
)

// Pinned modules whose shipped CRDs the tests install, as users' Helm charts would.
const (
	CertManagerModule     = "github.com/cert-manager/cert-manager@v1.19.0"
	ExternalSecretsModule = "github.com/external-secrets/external-secrets@v0.12.1"
)

// ModuleSource returns the folder holding module's source ("path@version"). A module already
// in the module cache is used as it is (it was verified when it was downloaded), so this works
// offline, as inside a test's network namespace; otherwise `go mod download` fetches it.
func ModuleSource(ctx context.Context, module string) (string, error) {
	if dir := cachedModule(ctx, module); dir != "" {
		return dir, nil
	}
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no Dir in %s", module, out)
	}
	return info.Dir, nil
}

// ModuleDir is module's source folder ("path@version"), fetched if needed. A module that a
// tools module requires is fetched from that module's folder, so its go.sum verifies it
// (some modules the controllers' images need are not in the checksum database).
func ModuleDir(ctx context.Context, module string) (string, error) {
	if dir := cachedModule(ctx, module); dir != "" {
		return dir, nil
	}
	path, version, _ := strings.Cut(module, "@")
	mods, _ := filepath.Glob(filepath.Join(repo.Root(), "tools", "*", "go.mod"))
	for _, gomod := range mods {
		if b, err := os.ReadFile(gomod); err == nil && strings.Contains(string(b), path+" "+version) {
			cmd := exec.CommandContext(ctx, "go", "mod", "download", module)
			cmd.Dir = filepath.Dir(gomod)
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("go mod download %s (in %s): %v: %s", module, cmd.Dir, err, out)
			}
			if dir := cachedModule(ctx, module); dir != "" {
				return dir, nil
			}
		}
	}
	return ModuleSource(ctx, module)
}

// cachedModule is module's folder in the module cache, or "" when it is not there.
func cachedModule(ctx context.Context, module string) string {
	path, version, _ := strings.Cut(module, "@")
	ep, err1 := modpath.EscapePath(path)
	ev, err2 := modpath.EscapeVersion(version)
	cache, err3 := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err1 != nil || err2 != nil || err3 != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(cache)), ep+"@"+ev)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ""
	}
	return dir
}

// ModuleCRDs reads the CRDs a Go module ships under dir (fetched through the module proxy by
// `go mod download`, once; `make tools` does it before any test runs). Helm template text in
// labels is dropped, and conversion webhooks (placeholders a chart patches) are removed so the
// API server never dials anything.
func ModuleCRDs(ctx context.Context, module, dir string) ([]*unstructured.Unstructured, error) {
	root, err := ModuleSource(ctx, module)
	if err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
	sort.Strings(files)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			m := map[string]any{}
			if err := utiljson.Unmarshal(j, &m); err != nil || m["kind"] != "CustomResourceDefinition" {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetLabels(nil)
			unstructured.RemoveNestedField(u.Object, "spec", "conversion")
			crds = append(crds, u)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs under %s/%s", module, dir)
	}
	return crds, nil
}
