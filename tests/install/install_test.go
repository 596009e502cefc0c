package install

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

const (
	// A throwaway release, tagged only inside the snapshot repository of this test.
	releaseTag     = "v0.9.0-rc.1"
	releaseVersion = "0.9.0-rc.1"
	sdkModule      = "github.com/readiness-io/pulumi-readiness/sdk"
	// The schema's pluginDownloadURL: GitHub releases of readiness-io/pulumi-readiness.
	downloadURL = "github://api.github.com/readiness-io"
	// README's mirror override: everything Pulumi would fetch from downloadURL comes from a mirror.
	overridePattern = `^github://api\.github\.com/readiness-io`
)

var (
	platform = runtime.GOOS + "-" + runtime.GOARCH
	tarball  = "pulumi-resource-readiness-v" + releaseVersion + "-" + platform + ".tar.gz"
)

// TestReleaseAndInstall walks the release and a new user's install paths in order; each step
// needs the one before, so the first failure stops the walk.
func TestReleaseAndInstall(t *testing.T) {
	ctx := context.Background()
	toolsBin, err := tools.EnsureTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	pulumiCLI := filepath.Join(toolsBin, "pulumi")
	snap := snapshot(t)
	t.Logf("snapshot of the working tree at %s, tagged %s", snap, releaseTag)

	step := func(name string, f func(t *testing.T)) {
		start := time.Now()
		ok := t.Run(name, f)
		t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
		if !ok {
			t.FailNow()
		}
	}

	step("release build at the tag: one version everywhere", func(t *testing.T) {
		if v := strings.TrimSpace(mustRun(t, snap, makeEnv(t), "make", "--no-print-directory", "version")); v != releaseVersion {
			t.Fatalf("make version at tag %s printed %q", releaseTag, v)
		}
		notes := mustRun(t, snap, makeEnv(t), "make", "--no-print-directory", "release-notes")
		if !strings.Contains(notes, "#16") || strings.Contains(notes, "## [") {
			t.Errorf("make release-notes should print only the CHANGELOG section of %s (naming issue #16):\n%s", releaseVersion, notes)
		}
		// The release workflow's build steps, in its order.
		mustRun(t, snap, makeEnv(t), "make", "--no-print-directory", "sdk", "dist", "sdk-nodejs", "sdk-python", "PLATFORMS=host", "PY_ENV="+pyEnv(t))
		checkRelease(t, snap, pulumiCLI)
		mustRun(t, snap, makeEnv(t), "make", "--no-print-directory", "release-sdk-tag")
		if st := mustRun(t, snap, nil, "git", "status", "--porcelain", "--", "schema.json", "sdk"); st != "" {
			t.Errorf("release-sdk-tag left generated files out of its commit:\n%s", st)
		}
		mustRun(t, snap, nil, "git", "rev-parse", "--verify", "sdk/"+releaseTag)
	})

	dist, err := os.ReadFile(filepath.Join(snap, "dist", tarball))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(snap, "dist", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, map[string][]byte{tarball: dist, "SHA256SUMS": sums})
	t.Logf("plugin server (a mirror of the release assets) at %s", srv.URL)

	step("pulumi plugin install --server", func(t *testing.T) {
		home := t.TempDir()
		out := mustRun(t, t.TempDir(), pulumiEnv(toolsBin, home), pulumiCLI,
			"plugin", "install", "resource", "readiness", releaseVersion, "--server", srv.URL)
		checkInstalled(t, home, out)
		if !srv.served(tarball) {
			t.Errorf("the plugin was not downloaded from %s", srv.URL)
		}
	})

	step("SHA256SUMS: verify, then install from the file", func(t *testing.T) {
		if _, err := exec.LookPath("sha256sum"); err != nil {
			t.Skip("sha256sum (GNU coreutils) is not installed")
		}
		dl := t.TempDir()
		writeFile(t, filepath.Join(dl, "SHA256SUMS"), sums)
		writeFile(t, filepath.Join(dl, tarball), dist)
		mustRun(t, dl, nil, "sha256sum", "--check", "--ignore-missing", "SHA256SUMS")
		home := t.TempDir()
		out := mustRun(t, dl, pulumiEnv(toolsBin, home), pulumiCLI,
			"plugin", "install", "resource", "readiness", releaseVersion, "--file", filepath.Join(dl, tarball))
		checkInstalled(t, home, out)

		writeFile(t, filepath.Join(dl, tarball), tamper(dist))
		out, err := run(dl, nil, "sha256sum", "--check", "--ignore-missing", "SHA256SUMS")
		if err == nil || !strings.Contains(out, tarball+": FAILED") {
			t.Errorf("a tampered tarball must fail the SHA256SUMS check, got %v:\n%s", err, out)
		}
	})

	step("pulumi plugin install --checksum", func(t *testing.T) {
		// A checksum that does not match what the server sends: a clear refusal, nothing installed.
		home := t.TempDir()
		wrong := sha256.Sum256(tamper(dist))
		out, err := run(t.TempDir(), pulumiEnv(toolsBin, home), pulumiCLI, "plugin", "install", "resource", "readiness",
			releaseVersion, "--server", srv.URL, "--checksum", hex.EncodeToString(wrong[:]))
		if err == nil || !strings.Contains(out, "invalid checksum, expected "+hex.EncodeToString(wrong[:])) {
			t.Errorf("a wrong --checksum must fail with 'invalid checksum', got %v:\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(home, "plugins", "resource-readiness-v"+releaseVersion, "pulumi-resource-readiness")); err == nil {
			t.Error("the plugin was installed despite the wrong checksum")
		}
		// Pulumi v3.259.0 hashes every read of the download except the last one (net/http hands the
		// final bytes over together with io.EOF, and its checksumReader skips them), so even the
		// right checksum is refused. README says so and recommends SHA256SUMS + --file instead;
		// this tells us when a newer CLI fixes it.
		right := sha256.Sum256(dist)
		out, err = run(t.TempDir(), pulumiEnv(toolsBin, t.TempDir()), pulumiCLI, "plugin", "install", "resource", "readiness",
			releaseVersion, "--server", srv.URL, "--checksum", hex.EncodeToString(right[:]))
		if err == nil {
			t.Errorf("pulumi plugin install --checksum now accepts the right checksum: update README (Install) to recommend it")
		} else if !strings.Contains(out, "invalid checksum, expected "+hex.EncodeToString(right[:])) {
			t.Errorf("unexpected failure of --checksum with the right checksum: %v\n%s", err, out)
		}
	})

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, testenv.CP.Kubeconfig)

	goApp := filepath.Join(t.TempDir(), "app")
	step("Go program: the tagged SDK module from a module proxy, built outside the repository", func(t *testing.T) {
		buildGoApp(t, goProxy(t, snap), goApp)
	})

	step("Go program: the engine downloads the plugin (SDK default URL + override) and runs a gate", func(t *testing.T) {
		home, work := t.TempDir(), t.TempDir()
		srv.reset()
		env := append(stackEnv(t, toolsBin, home), "PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES="+overridePattern+"="+srv.URL)
		out := mustRun(t, work, env, goApp, work, kubeconfig)
		checkReadyNodes(t, out)
		checkInstalled(t, home, out)
		if !srv.served(tarball) {
			t.Errorf("the engine did not download the plugin from %s", srv.URL)
		}
	})

	tsApp := t.TempDir()
	step("TypeScript program: npm install the packed SDK and compile with tsc", func(t *testing.T) {
		buildTSApp(t, snap, tsApp)
	})

	step("TypeScript program: the engine downloads the plugin (pluginDownloadURL option) and runs a gate", func(t *testing.T) {
		app := tsApp
		home, work := t.TempDir(), t.TempDir()
		srv.reset()
		out := mustRun(t, app, stackEnv(t, toolsBin, home), node(t), filepath.Join(app, "bin", "index.js"), work, kubeconfig, srv.URL)
		checkReadyNodes(t, out)
		checkInstalled(t, home, out)
		if !srv.served(tarball) {
			t.Errorf("the engine did not download the plugin from %s", srv.URL)
		}
	})

	pyApp := filepath.Join(t.TempDir(), "venv")
	step("Python program: pip install the built wheel into a fresh virtual environment", func(t *testing.T) {
		buildPyApp(t, snap, pyApp)
	})

	step("Python program: the engine downloads the plugin (plugin_download_url option) and runs a gate", func(t *testing.T) {
		home, work := t.TempDir(), t.TempDir()
		srv.reset()
		out := mustRun(t, work, stackEnv(t, toolsBin, home), filepath.Join(pyApp, "bin", "python"),
			filepath.Join(testdata(t), "pyapp", "app.py"), work, kubeconfig, srv.URL)
		checkReadyNodes(t, out)
		checkInstalled(t, home, out)
		if !srv.served(tarball) {
			t.Errorf("the engine did not download the plugin from %s", srv.URL)
		}
	})

	step("a corrupted download fails clearly; the next run downloads again", func(t *testing.T) {
		srv.set(tarball, dist[:len(dist)/2])
		home, work := t.TempDir(), t.TempDir()
		env := append(stackEnv(t, toolsBin, home), "PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES="+overridePattern+"="+srv.URL)
		out, err := run(work, env, goApp, work, kubeconfig)
		if err == nil {
			t.Fatalf("the stack ran with a truncated plugin tarball:\n%s", out)
		}
		for _, want := range []string{"Could not automatically download and install resource plugin",
			"'pulumi-resource-readiness' at version v" + releaseVersion, "unexpected EOF"} {
			if !strings.Contains(out, want) {
				t.Errorf("the failure should say %q:\n%s", want, out)
			}
		}
		// The half-written plugin is not taken for an installed one: once the mirror is fixed, the
		// same PULUMI_HOME downloads it again and the stack runs.
		srv.set(tarball, dist)
		srv.reset()
		out = mustRun(t, work, env, goApp, work, kubeconfig)
		checkReadyNodes(t, out)
		checkInstalled(t, home, out)
		if !srv.served(tarball) {
			t.Errorf("the broken download was kept: no new download from %s", srv.URL)
		}
	})
}

// checkRelease checks that the tag's version reached the plugin (--version and the schema it
// serves), schema.json, the Go SDK and the Node.js package, and the tarball's SHA256SUMS line.
func checkRelease(t *testing.T, snap, pulumiCLI string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(snap, "dist"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "SHA256SUMS "+tarball {
		t.Errorf("dist/ holds %v, want the host tarball %s and SHA256SUMS", names, tarball)
	}
	b, err := os.ReadFile(filepath.Join(snap, "dist", tarball))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if sums := readFile(t, filepath.Join(snap, "dist", "SHA256SUMS")); sums != hex.EncodeToString(sum[:])+"  "+tarball+"\n" {
		t.Errorf("SHA256SUMS = %q, want the tarball's sha256 in sha256sum's format", sums)
	}

	plugin := filepath.Join(t.TempDir(), "plugin")
	if err := os.MkdirAll(plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, plugin, nil, "tar", "-xzf", filepath.Join(snap, "dist", tarball))
	bin := filepath.Join(plugin, "pulumi-resource-readiness")
	if v := strings.TrimSpace(mustRun(t, plugin, nil, bin, "--version")); v != releaseVersion {
		t.Errorf("pulumi-resource-readiness --version = %q, want %q", v, releaseVersion)
	}
	served := mustRun(t, plugin, pulumiEnv(filepath.Dir(pulumiCLI), t.TempDir()), pulumiCLI, "package", "get-schema", bin)
	var fromPlugin, committed map[string]any
	if err := json.Unmarshal([]byte(served), &fromPlugin); err != nil {
		t.Fatalf("pulumi package get-schema: %v\n%s", err, served)
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(snap, "schema.json"))), &committed); err != nil {
		t.Fatal(err)
	}
	if fromPlugin["version"] != releaseVersion || fromPlugin["pluginDownloadURL"] != downloadURL {
		t.Errorf("the plugin's schema says version %v, pluginDownloadURL %v", fromPlugin["version"], fromPlugin["pluginDownloadURL"])
	}
	if a, b := mustJSON(t, fromPlugin), mustJSON(t, committed); a != b {
		t.Errorf("schema.json differs from what the released plugin serves")
	}

	var goPlugin struct{ Name, Version, Server string }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(snap, "sdk/go/readiness/pulumi-plugin.json"))), &goPlugin); err != nil {
		t.Fatal(err)
	}
	if goPlugin.Name != "readiness" || goPlugin.Version != releaseVersion || goPlugin.Server != downloadURL {
		t.Errorf("sdk/go/readiness/pulumi-plugin.json = %+v", goPlugin)
	}
	utilities := readFile(t, filepath.Join(snap, "sdk/go/readiness/internal/pulumiUtilities.go"))
	for _, want := range []string{`semver.MustParse("` + releaseVersion + `")`, `pulumi.PluginDownloadURL("` + downloadURL + `")`} {
		if !strings.Contains(utilities, want) {
			t.Errorf("the Go SDK's resource defaults lack %s", want)
		}
	}
	var pkg struct {
		Name    string
		Version string
		Pulumi  struct {
			Resource              bool
			Name, Version, Server string
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(snap, "sdk/nodejs/bin/package.json"))), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "@readiness-io/pulumi-readiness" || pkg.Version != releaseVersion || pkg.Pulumi.Version != releaseVersion ||
		pkg.Pulumi.Server != downloadURL || pkg.Pulumi.Name != "readiness" || !pkg.Pulumi.Resource {
		t.Errorf("sdk/nodejs/bin/package.json = %+v", pkg)
	}
	if _, err := os.Stat(filepath.Join(snap, "sdk/nodejs/bin", "readiness-io-pulumi-readiness-"+releaseVersion+".tgz")); err != nil {
		t.Errorf("the packed Node.js package: %v", err)
	}
	checkWheel(t, snap)
}

// pyWheel is the Python package's file at the release version (PEP 440 spells 0.9.0-rc.1 0.9.0rc1).
const pyWheel = "pulumi_readiness-0.9.0rc1-py3-none-any.whl"

// checkWheel checks that the built wheel carries the release version, in its metadata and in the
// pulumi-plugin.json the engine reads to install the plugin.
func checkWheel(t *testing.T, snap string) {
	t.Helper()
	z, err := zip.OpenReader(filepath.Join(snap, "sdk/python/dist", pyWheel))
	if err != nil {
		t.Fatalf("the Python wheel: %v", err)
	}
	defer z.Close()
	var plugin struct {
		Resource              bool
		Name, Version, Server string
	}
	metadata := ""
	for _, f := range z.File {
		switch {
		case f.Name == "pulumi_readiness/pulumi-plugin.json":
			if err := json.Unmarshal([]byte(zipText(t, f)), &plugin); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(f.Name, ".dist-info/METADATA"):
			metadata = zipText(t, f)
		}
	}
	if !plugin.Resource || plugin.Name != "readiness" || plugin.Version != releaseVersion || plugin.Server != downloadURL {
		t.Errorf("the wheel's pulumi_readiness/pulumi-plugin.json = %+v", plugin)
	}
	if !strings.Contains(metadata, "\nName: pulumi_readiness\n") || !strings.Contains(metadata, "\nVersion: 0.9.0rc1\n") {
		t.Errorf("the wheel's METADATA does not name pulumi_readiness 0.9.0rc1:\n%s", metadata)
	}
}

func zipText(t *testing.T, f *zip.File) string {
	t.Helper()
	r, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pyEnv is the repository's Python environment (make py-deps): the setuptools the release build
// makes the wheel with, and the wheels of the SDK's dependencies a fresh environment installs.
func pyEnv(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "wheels")); err != nil {
		t.Fatalf("no Python environment at %s: run make py-deps (make test-install does): %v", dir, err)
	}
	return dir
}

// buildPyApp makes a fresh virtual environment and installs the release's wheel into it with pip,
// as a user installs it from PyPI; pip runs offline, its dependencies coming from the wheels
// make py-deps downloaded.
func buildPyApp(t *testing.T, snap, venv string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed")
	}
	mustRun(t, filepath.Dir(venv), offlineEnv(), python, "-m", "venv", venv)
	mustRun(t, filepath.Dir(venv), offlineEnv(), filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
		"--no-index", "--find-links", filepath.Join(pyEnv(t), "wheels"), filepath.Join(snap, "sdk/python/dist", pyWheel))
}

func testdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshot copies the working tree (tracked and untracked files, not ignored ones) into a new
// repository and makes the release commit a maintainer makes: CHANGELOG's Unreleased section
// becomes the release's, then the tag. The repository under test is never touched.
func snapshot(t *testing.T) string {
	t.Helper()
	root := repo.Root()
	dir := t.TempDir()
	list := mustRun(t, root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, name := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink/submodule: not shipped
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	// The SDK's npm dependencies, as `make sdk-nodejs` installed them (ignored by git, so not copied).
	linkNodeModules(t, filepath.Join(root, "sdk/nodejs/node_modules"), filepath.Join(dir, "sdk/nodejs/node_modules"))
	git := func(args ...string) { mustRun(t, dir, gitEnv(), "git", args...) }
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "snapshot of the working tree")
	changelog := readFile(t, filepath.Join(dir, "CHANGELOG.md"))
	const unreleased = "## [Unreleased]\n"
	if !strings.Contains(changelog, unreleased) {
		t.Fatalf("CHANGELOG.md has no %q heading", strings.TrimSpace(unreleased))
	}
	changelog = strings.Replace(changelog, unreleased,
		unreleased+"\n## ["+releaseVersion+"] - "+time.Now().UTC().Format("2006-01-02")+"\n", 1)
	writeFile(t, filepath.Join(dir, "CHANGELOG.md"), []byte(changelog))
	git("commit", "-q", "-am", "Release "+releaseVersion)
	git("tag", releaseTag)
	return dir
}

// goProxy is a module proxy folder (GOPROXY=file://...) holding the SDK module as the Go module
// proxy would serve it from the tag sdk/v<version>: the zip made from that commit's tracked files.
func goProxy(t *testing.T, snap string) string {
	t.Helper()
	// Not t.TempDir(): its name holds the test's, and GOPROXY is a comma-separated list.
	dir, err := os.MkdirTemp("", "readiness-goproxy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := module.Version{Path: sdkModule, Version: releaseTag}
	at := filepath.Join(dir, filepath.FromSlash(sdkModule), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := modzip.CreateFromVCS(&zip, m, snap, "sdk/"+releaseTag, "sdk"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(at, releaseTag+".zip"), zip.Bytes())
	writeFile(t, filepath.Join(at, releaseTag+".mod"), []byte(mustRun(t, snap, nil, "git", "show", "sdk/"+releaseTag+":sdk/go.mod")))
	writeFile(t, filepath.Join(at, releaseTag+".info"), fmt.Appendf(nil, `{"Version":%q,"Time":%q}`, releaseTag, time.Now().UTC().Format(time.RFC3339)))
	writeFile(t, filepath.Join(at, "list"), []byte(releaseTag+"\n"))
	// The module cache keeps what it fetched; drop this throwaway version before and after.
	dropCachedSDK(t)
	t.Cleanup(func() { dropCachedSDK(t) })
	return dir
}

func dropCachedSDK(t *testing.T) {
	cache := strings.TrimSpace(mustRun(t, "", nil, "go", "env", "GOMODCACHE"))
	for _, p := range []string{
		filepath.Join(cache, filepath.FromSlash(sdkModule)+"@"+releaseTag),
		filepath.Join(cache, "cache", "download", filepath.FromSlash(sdkModule), "@v"),
	} {
		_ = filepath.Walk(p, func(path string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
		if strings.HasSuffix(p, "@v") {
			matches, _ := filepath.Glob(filepath.Join(p, releaseTag+".*"))
			for _, m := range matches {
				_ = os.Remove(m)
			}
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			t.Logf("removing %s: %v", p, err)
		}
	}
}

// buildGoApp builds testdata/goapp in a fresh module that requires the SDK at the release tag,
// fetched from the module proxy folder as `go get github.com/readiness-io/pulumi-readiness/sdk@<tag>`
// fetches it (no replace). Offline, the go command can use only what the module cache holds, and
// `go mod tidy` in a new module wants go.mod files of old modules deep in Pulumi's graph that no
// build here ever downloaded; so the module starts from the requirement list that tidy computes
// online for the same imports: this repository's own (its tests build the same Pulumi packages).
func buildGoApp(t *testing.T, proxy, out string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.go"), []byte(readFile(t, filepath.Join("testdata", "goapp", "main.go"))))
	root := repo.Root()
	repo, err := modfile.Parse("go.mod", []byte(readFile(t, filepath.Join(root, "go.mod"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	app := &modfile.File{}
	if err := app.AddModuleStmt("example.com/readiness-install"); err != nil {
		t.Fatal(err)
	}
	if err := app.AddGoStmt(repo.Go.Version); err != nil {
		t.Fatal(err)
	}
	for _, r := range repo.Require {
		if r.Mod.Path != sdkModule {
			app.AddNewRequire(r.Mod.Path, r.Mod.Version, true)
		}
	}
	app.AddNewRequire(sdkModule, releaseTag, false)
	app.Cleanup()
	b, err := app.Format()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.mod"), b)
	writeFile(t, filepath.Join(dir, "go.sum"), []byte(readFile(t, filepath.Join(root, "go.sum"))))
	env := append(offlineEnv(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",off",
		"GOSUMDB=off", // every other module comes from the local module cache, verified when downloaded
		// Beside the Makefile's (-trimpath), so the program's packages come from the build cache.
		"GOFLAGS=-mod=mod "+os.Getenv("GOFLAGS"),
		// The go command indexes the module cache per module@version, assuming a version never
		// changes; this throwaway one is rebuilt each run, so a stale index would list old files.
		"GODEBUG=goindex=0",
	)
	mustRun(t, dir, env, "go", "build", "-o", out, ".")
	if gomod := readFile(t, filepath.Join(dir, "go.mod")); strings.Contains(gomod, "replace") || !strings.Contains(gomod, sdkModule+" "+releaseTag) {
		t.Fatalf("go.mod should require %s %s and replace nothing:\n%s", sdkModule, releaseTag, gomod)
	}
}

// buildTSApp makes a fresh npm project that installs the packed Node.js package (what npm publish
// ships) and compiles testdata/tsapp with tsc. npm runs offline from the cache `make sdk-nodejs`
// filled, which holds the SDK's own locked dependencies but not the registry's package lists that
// resolving version ranges needs; so the project's lock file pins those same versions.
func buildTSApp(t *testing.T, snap, dir string) {
	t.Helper()
	var lock map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(snap, "sdk/nodejs/package-lock.json"))), &lock); err != nil {
		t.Fatal(err)
	}
	packages, _ := lock["packages"].(map[string]any)
	version := func(name string) string {
		p, _ := packages["node_modules/"+name].(map[string]any)
		v, _ := p["version"].(string)
		if v == "" {
			t.Fatalf("sdk/nodejs/package-lock.json locks no %s", name)
		}
		return v
	}
	pkg := map[string]any{
		"name": "readiness-install-ts", "private": true,
		"dependencies": map[string]string{
			"@readiness-io/pulumi-readiness": "file:" + filepath.Join(snap, "sdk/nodejs/bin", "readiness-io-pulumi-readiness-"+releaseVersion+".tgz"),
			"@pulumi/pulumi":                 version("@pulumi/pulumi"),
		},
		"devDependencies": map[string]string{"typescript": version("typescript"), "@types/node": version("@types/node")},
	}
	writeFile(t, filepath.Join(dir, "package.json"), []byte(mustJSON(t, pkg)))
	lock["name"] = pkg["name"]
	delete(lock, "version")
	packages[""] = map[string]any{"name": pkg["name"], "dependencies": pkg["dependencies"], "devDependencies": pkg["devDependencies"]}
	writeFile(t, filepath.Join(dir, "package-lock.json"), []byte(mustJSON(t, lock)))
	for _, f := range []string{"index.ts", "tsconfig.json"} {
		writeFile(t, filepath.Join(dir, f), []byte(readFile(t, filepath.Join("testdata", "tsapp", f))))
	}
	linkNodeModules(t, filepath.Join(snap, "sdk/nodejs/node_modules"), filepath.Join(dir, "node_modules"))
	env := offlineEnv()
	mustRun(t, dir, env, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error")
	mustRun(t, dir, env, node(t), filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", ".")
}

// linkNodeModules gives dst the packages of src as hard links (GNU cp -al), so npm install, offline
// and locked to the same versions, finds them in place instead of unpacking 150 MB again. npm
// rewrites only its hidden lock file in place: that one is left out, and npm writes a new one.
// Where cp -al fails, npm install simply does the whole work.
func linkNodeModules(t *testing.T, src, dst string) {
	t.Helper()
	if _, err := os.Stat(src); err != nil {
		return
	}
	if out, err := run("", nil, "cp", "-al", src, dst); err != nil {
		t.Logf("cp -al %s: %v %s (npm install will unpack the packages)", src, err, out)
		_ = os.RemoveAll(dst)
		return
	}
	_ = os.Remove(filepath.Join(dst, ".package-lock.json"))
}

func checkReadyNodes(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res struct{ ReadyNodes *float64 }
	for _, l := range lines {
		if strings.HasPrefix(l, `{"readyNodes":`) {
			_ = json.Unmarshal([]byte(l), &res)
		}
	}
	if res.ReadyNodes == nil || *res.ReadyNodes < 1 {
		t.Errorf("the NodesReady gate did not report a ready node:\n%s", out)
	}
}

func checkInstalled(t *testing.T, home, out string) {
	t.Helper()
	bin := filepath.Join(home, "plugins", "resource-readiness-v"+releaseVersion, "pulumi-resource-readiness")
	b, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("no plugin installed in the empty PULUMI_HOME (%v):\n%s", err, out)
	}
	if v := strings.TrimSpace(string(b)); v != releaseVersion {
		t.Errorf("installed plugin --version = %q, want %q", v, releaseVersion)
	}
}

// tamper flips one byte in the middle: still the right size, no longer the released bytes.
func tamper(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)/2] ^= 0xff
	return c
}

// server serves release assets on 127.0.0.1, as a mirror or GitHub's download URLs would.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
}

func newServer(t *testing.T, files map[string][]byte) *server {
	s := &server{files: files, gets: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		s.mu.Lock()
		b, ok := s.files[name]
		s.gets[name]++
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) set(name string, b []byte) { s.mu.Lock(); s.files[name] = b; s.mu.Unlock() }
func (s *server) reset()                    { s.mu.Lock(); s.gets = map[string]int{}; s.mu.Unlock() }
func (s *server) served(name string) bool   { s.mu.Lock(); defer s.mu.Unlock(); return s.gets[name] > 0 }

// offlineEnv is the environment of every go, npm and pulumi process here: offline module and
// package caches, and an HTTP proxy on a closed loopback port, so a request for anything but
// 127.0.0.1 fails instead of leaving the machine (loopback itself is never proxied).
func offlineEnv() []string {
	drop := map[string]bool{"MAKEFLAGS": true, "MFLAGS": true, "MAKELEVEL": true, "MAKEOVERRIDES": true,
		"VERSION": true, "SDK_VERSION": true, "PLATFORMS": true, "DIST": true, "GOFLAGS": true, "PULUMI_HOME": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "PULUMI_") || strings.HasPrefix(strings.ToLower(k), "npm_config_") ||
			strings.HasSuffix(strings.ToLower(k), "_proxy") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off",
		"npm_config_offline=true", "npm_config_update_notifier=false",
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"PULUMI_SKIP_UPDATE_CHECK=true",
	)
}

// makeEnv runs the snapshot's make targets offline, as a release workflow would (git identity
// for its release commit).
func makeEnv(t *testing.T) []string {
	return append(append(offlineEnv(), gitEnv()...), "PULUMI_HOME="+t.TempDir())
}

func gitEnv() []string {
	return []string{"GIT_AUTHOR_NAME=release-test", "GIT_AUTHOR_EMAIL=release-test@127.0.0.1",
		"GIT_COMMITTER_NAME=release-test", "GIT_COMMITTER_EMAIL=release-test@127.0.0.1",
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=commit.gpgsign", "GIT_CONFIG_VALUE_0=false",
		"GIT_CONFIG_KEY_1=tag.gpgsign", "GIT_CONFIG_VALUE_1=false"}
}

// pulumiEnv is a Pulumi CLI with an empty home; PATH holds the tools (the CLI) and the system,
// never a pulumi-resource-readiness, and ambient plugins are ignored anyway.
func pulumiEnv(toolsBin, home string) []string {
	var env []string
	for _, kv := range offlineEnv() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	path := []string{toolsBin}
	if n, err := exec.LookPath("node"); err == nil {
		path = append(path, filepath.Dir(n))
	}
	path = append(path, "/usr/local/bin", "/usr/bin", "/bin")
	return append(env, "PATH="+strings.Join(path, string(os.PathListSeparator)),
		"PULUMI_HOME="+home, "PULUMI_IGNORE_AMBIENT_PLUGINS=true")
}

// stackEnv adds a local backend (a folder of its own: home stays empty) for a program's stacks.
func stackEnv(t *testing.T, toolsBin, home string) []string {
	return append(pulumiEnv(toolsBin, home),
		"PULUMI_BACKEND_URL=file://"+t.TempDir(),
		"PULUMI_CONFIG_PASSPHRASE=readiness-local-only",
		"PULUMI_DIY_BACKEND_NO_LEGACY_WARNING=true")
}

func node(t *testing.T) string {
	n, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed")
	}
	return n
}

func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	// stdout is returned (callers parse it); stderr is shown with it when the command fails.
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, out, stderr.String())
	}
	return string(out)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
