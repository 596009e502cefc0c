package controlplane

import "testing"

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
