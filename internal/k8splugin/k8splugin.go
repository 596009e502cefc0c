// Package k8splugin installs the pulumi-kubernetes resource plugin that the demo, the stack
// tests and the examples create Kubernetes objects with, at the one version pinned in VERSION
// (the Makefile reads the same file). It prefers the tarball in the shared folder beside the
// repository (checked against its SHA256SUMS) and falls back to `pulumi plugin install`, which
// downloads the official release on a machine with internet.
package k8splugin

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
)

//go:embed VERSION
var versionFile string

// Version is the pinned pulumi-kubernetes plugin version (no "v").
var Version = strings.TrimSpace(versionFile)

// Tarball is the release asset's file name for this machine.
func Tarball() string {
	return fmt.Sprintf("pulumi-resource-kubernetes-v%s-%s-%s.tar.gz", Version, runtime.GOOS, runtime.GOARCH)
}

// SharedDir is the folder of shared artefacts: $READINESS_SHARED_DIR, else ../shared beside
// the repository (where CI puts it), else /work/shared; "" when none exists.
func SharedDir() string {
	for _, d := range []string{os.Getenv("READINESS_SHARED_DIR"), filepath.Join(repo.Root(), "..", "shared"), "/work/shared"} {
		if d == "" {
			continue
		}
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return ""
}

// ProjectHome is the project's PULUMI_HOME: $PULUMI_HOME when set (the Makefile exports
// <repo>/.cache/pulumi-home), else that folder.
func ProjectHome() string {
	if h := os.Getenv("PULUMI_HOME"); h != "" {
		return h
	}
	return filepath.Join(repo.Root(), ".cache", "pulumi-home")
}

// PluginDir is where `pulumi plugin install` puts the plugin under home.
func PluginDir(home string) string {
	return filepath.Join(home, "plugins", "resource-kubernetes-v"+Version)
}

// Installed reports whether the plugin is completely installed under home.
func Installed(home string) bool {
	dir := PluginDir(home)
	if _, err := os.Stat(dir + ".partial"); err == nil {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "pulumi-resource-kubernetes"))
	return err == nil && st.Mode().IsRegular()
}

// HowToInstall is what a person reads when the plugin is missing.
func HowToInstall(home string) string {
	return fmt.Sprintf("the pulumi-kubernetes plugin v%[1]s is not installed in %[2]s: run `make k8s-plugin`, or "+
		"`PULUMI_HOME=%[2]s pulumi plugin install resource kubernetes v%[1]s` (add `--file <dir>/%[3]s` offline; "+
		"READINESS_SHARED_DIR=<dir> points the project at a folder holding that tarball and its SHA256SUMS)", Version, home, Tarball())
}

// Install installs the plugin into home with the Pulumi CLI pulumiBin, unless it is there.
func Install(ctx context.Context, pulumiBin, home string, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if Installed(home) {
		return nil
	}
	// Test packages run in parallel: one installs, the others wait and find it installed.
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(home, ".k8splugin.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if Installed(home) {
		return nil
	}
	args := []string{"plugin", "install", "resource", "kubernetes", "v" + Version}
	if shared := SharedDir(); shared != "" {
		tarball := filepath.Join(shared, "plugins", Tarball())
		if _, err := os.Stat(tarball); err == nil {
			if err := verify(tarball); err != nil {
				return err
			}
			args = append(args, "--file", tarball)
			logf("installing pulumi-kubernetes v%s from %s into %s", Version, tarball, home)
		}
	}
	if len(args) == 5 {
		logf("installing pulumi-kubernetes v%s from its official release into %s", Version, home)
	}
	cmd := exec.CommandContext(ctx, pulumiBin, args...)
	cmd.Env = append(os.Environ(), "PULUMI_HOME="+home, "PULUMI_SKIP_UPDATE_CHECK=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s\n`pulumi %s` failed: %v\n%s", HowToInstall(home), strings.Join(args, " "), err, out)
	}
	if !Installed(home) {
		return errors.New(HowToInstall(home))
	}
	return nil
}

// verify checks tarball against the SHA256SUMS file beside it.
func verify(tarball string) error {
	want, err := expectedSum(filepath.Join(filepath.Dir(tarball), "SHA256SUMS"), filepath.Base(tarball))
	if err != nil {
		return err
	}
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s: sha256 %s, SHA256SUMS says %s: not installing it", tarball, got, want)
	}
	return nil
}

// expectedSum reads name's checksum from a SHA256SUMS file (`<hex>  <name>` lines).
func expectedSum(sumsPath, name string) (string, error) {
	f, err := os.Open(sumsPath)
	if err != nil {
		return "", fmt.Errorf("checking the plugin tarball: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == name {
			return fields[0], nil
		}
	}
	return "", fmt.Errorf("%s has no line for %s", sumsPath, name)
}
