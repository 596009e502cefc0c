package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Under the Makefile's -trimpath the repository is found from the working directory (a test
// runs in its package's folder); either way Root must hold this repository's go.mod.
func TestRoot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(Root(), "go.mod"))
	if err != nil || !isRepoGoMod(b) {
		t.Fatalf("Root() = %s, which holds no go.mod of %s (%v)", Root(), Module, err)
	}
	for mod, want := range map[string]bool{
		"module " + Module + "\n\ngo 1.25\n":       true,
		"// x\nmodule " + Module + "/examples\n":   false,
		"module github.com/readiness-io/other\n":   false,
		"go 1.25\nrequire " + Module + " v0.0.0\n": false,
	} {
		if got := isRepoGoMod([]byte(mod)); got != want {
			t.Errorf("isRepoGoMod(%q) = %v, want %v", mod, got, want)
		}
	}
	// From a folder inside the repository (one with a go.mod of another module: examples/), and
	// from one outside it: an error naming where it looked, never a guess.
	if got, err := rootFrom(filepath.Join(Root(), "examples", "cert-manager")); err != nil || got != Root() {
		t.Errorf("rootFrom(examples/cert-manager) = %q, %v; want %q", got, err, Root())
	}
	outside := t.TempDir()
	if got, err := rootFrom(outside); err == nil || !strings.Contains(err.Error(), outside) {
		t.Errorf("rootFrom(%s) = %q, %v; want an error naming the folder", outside, got, err)
	}
}
