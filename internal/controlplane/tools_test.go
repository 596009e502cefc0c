package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file names `go build -o DIR/` gives the pinned tools' main packages.
func TestBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{
		"go.etcd.io/etcd/server/v3":                  "server",
		"k8s.io/kubernetes/cmd/kube-apiserver":       "kube-apiserver",
		"github.com/pulumi/pulumi/pkg/v3/cmd/pulumi": "pulumi",
		"./sdkgen":           "sdkgen",
		"example.com/tool/v": "v",
		"example.com/vault":  "vault",
	} {
		if got := binaryName(pkg); got != want {
			t.Errorf("binaryName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// Under the Makefile's -trimpath the repository is found from the working directory (a test
// runs in its package's folder); either way RepoRoot must hold this repository's go.mod.
func TestRepoRoot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "go.mod"))
	if err != nil || !isRepoGoMod(b) {
		t.Fatalf("RepoRoot() = %s, which holds no go.mod of %s (%v)", RepoRoot(), RepoModule, err)
	}
	for mod, want := range map[string]bool{
		"module " + RepoModule + "\n\ngo 1.25\n":       true,
		"// x\nmodule " + RepoModule + "/examples\n":   false,
		"module github.com/readiness-io/other\n":       false,
		"go 1.25\nrequire " + RepoModule + " v0.0.0\n": false,
	} {
		if got := isRepoGoMod([]byte(mod)); got != want {
			t.Errorf("isRepoGoMod(%q) = %v, want %v", mod, got, want)
		}
	}
	// From a folder inside the repository (one with a go.mod of another module: examples/), and
	// from one outside it: an error naming where it looked, never a guess.
	if got, err := repoRootFrom(filepath.Join(RepoRoot(), "examples", "cert-manager")); err != nil || got != RepoRoot() {
		t.Errorf("repoRootFrom(examples/cert-manager) = %q, %v; want %q", got, err, RepoRoot())
	}
	outside := t.TempDir()
	if got, err := repoRootFrom(outside); err == nil || !strings.Contains(err.Error(), outside) {
		t.Errorf("repoRootFrom(%s) = %q, %v; want an error naming the folder", outside, got, err)
	}
}

// An edit applies where its text is, once; anything else (upstream changed) is an error naming it.
func TestApplyEdit(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"a\nimport x\nb\n", "a\nb\n", true},
		{"a\nb\n", "", false},
		{"import x\nimport x\n", "", false},
	} {
		got, err := applyEdit([]byte(c.in), FileEdit{Path: "f.go", Old: "import x\n"})
		if (err == nil) != c.ok || (c.ok && string(got) != c.want) {
			t.Errorf("applyEdit(%q) = %q, %v", c.in, got, err)
		}
	}
}

// The Pulumi CLI's trim applies to the pinned module and leaves no cloud SDK (nor the slow-starting
// password-strength estimator) in the CLI.
func TestPulumiTrim(t *testing.T) {
	deps, err := TrimmedDeps(t.Context(), filepath.Join(RepoRoot(), "tools", "pulumi"), pulumiTrim, "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		for _, cloud := range []string{"github.com/aws/", "github.com/Azure/", "cloud.google.com/", "google.golang.org/api/cloudkms", "github.com/hashicorp/vault",
			"github.com/nbutton23/zxcvbn-go", "github.com/ccojocar/zxcvbn-go"} {
			if strings.HasPrefix(d, cloud) {
				t.Errorf("the trimmed CLI still links %s", d)
			}
		}
	}
	if len(deps) < 500 {
		t.Errorf("the trimmed CLI has %d packages: not the CLI", len(deps))
	}
}
