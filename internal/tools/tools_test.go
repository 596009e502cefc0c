package tools

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
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
	deps, err := TrimmedDeps(t.Context(), filepath.Join(repo.Root(), "tools", "pulumi"), pulumiTrim, "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi")
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
