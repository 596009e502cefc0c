package k8splugin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExpectedSum(t *testing.T) {
	dir := t.TempDir()
	sums := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(sums, []byte("abc  other.tar.gz\n9a9c  "+Tarball()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := expectedSum(sums, Tarball()); err != nil || got != "9a9c" {
		t.Fatalf("expectedSum = %q, %v", got, err)
	}
	if _, err := expectedSum(sums, "missing.tar.gz"); err == nil {
		t.Fatal("a tarball with no line must not be accepted")
	}
}

func TestVerifyRefusesAChangedTarball(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, Tarball())
	if err := os.WriteFile(tarball, []byte("not the plugin"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"),
		[]byte("9a9c578051af003162292d85e6c39f0af4fc563c1accde0a9e7cc8ae95fba0f2  "+Tarball()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := verify(tarball); err == nil {
		t.Fatal("a tarball whose sum differs from SHA256SUMS must be refused")
	}
}

func TestInstalledNeedsTheBinaryAndNoPartialMarker(t *testing.T) {
	home := t.TempDir()
	if Installed(home) {
		t.Fatal("empty home")
	}
	dir := PluginDir(home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pulumi-resource-kubernetes"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+".partial", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if Installed(home) {
		t.Fatal("a partial install is not installed")
	}
	os.Remove(dir + ".partial")
	if !Installed(home) {
		t.Fatal("complete install not seen")
	}
}
