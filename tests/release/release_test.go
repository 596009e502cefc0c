// Package release checks, without building anything, what the release relies on: the committed
// generated files all carry the development version and the plugin download URL the provider
// declares, CHANGELOG.md keeps its format, and the workflows call only make targets that
// `make test` runs. tests/install runs the release itself.
package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/repo"
	"github.com/readiness-io/pulumi-readiness/provider"
)

var root = repo.Root()

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(read(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// One version everywhere: what an untagged build stamps (provider.Version, the Makefile's
// DEV_VERSION) is the version of the committed schema.json, Go SDK and Node.js package, and all of
// them name the provider's plugin download URL.
func TestCommittedVersionsAgree(t *testing.T) {
	m := regexp.MustCompile(`(?m)^DEV_VERSION\s*:=\s*(\S+)$`).FindStringSubmatch(read(t, "Makefile"))
	if m == nil {
		t.Fatal("the Makefile sets no DEV_VERSION")
	}
	dev := m[1]
	if provider.Version != dev {
		t.Errorf("provider.Version defaults to %q, the Makefile's DEV_VERSION is %q", provider.Version, dev)
	}
	var schema struct{ Version, PluginDownloadURL string }
	decode(t, "schema.json", &schema)
	var goPlugin struct{ Version, Server string }
	decode(t, "sdk/go/readiness/pulumi-plugin.json", &goPlugin)
	var pkg struct {
		Version string
		Pulumi  struct{ Version, Server string }
	}
	decode(t, "sdk/nodejs/package.json", &pkg)
	var lock struct {
		Version  string
		Packages map[string]struct{ Version string }
	}
	decode(t, "sdk/nodejs/package-lock.json", &lock)
	for what, v := range map[string]string{
		"schema.json version":                         schema.Version,
		"sdk/go/readiness/pulumi-plugin.json version": goPlugin.Version,
		"sdk/nodejs/package.json version":             pkg.Version,
		"sdk/nodejs/package.json pulumi.version":      pkg.Pulumi.Version,
		"sdk/nodejs/package-lock.json version":        lock.Version,
		"sdk/nodejs/package-lock.json packages[\"\"]": lock.Packages[""].Version,
	} {
		if v != dev {
			t.Errorf("%s = %q, want DEV_VERSION %q (run make sdk)", what, v, dev)
		}
	}
	for what, v := range map[string]string{
		"schema.json pluginDownloadURL":              schema.PluginDownloadURL,
		"sdk/go/readiness/pulumi-plugin.json server": goPlugin.Server,
		"sdk/nodejs/package.json pulumi.server":      pkg.Pulumi.Server,
	} {
		if v != provider.PluginDownloadURL {
			t.Errorf("%s = %q, want %q", what, v, provider.PluginDownloadURL)
		}
	}
	utilities := read(t, "sdk/go/readiness/internal/pulumiUtilities.go")
	for _, want := range []string{`semver.MustParse("` + dev + `")`, `pulumi.PluginDownloadURL("` + provider.PluginDownloadURL + `")`} {
		if !strings.Contains(utilities, want) {
			t.Errorf("the Go SDK's resource defaults lack %s", want)
		}
	}
}

// Keep a Changelog: an Unreleased section first, then releases newest first as [X.Y.Z] - date,
// the form `make release-notes` looks for.
func TestChangelogFormat(t *testing.T) {
	heading := regexp.MustCompile(`(?m)^## \[([^\]]+)\](.*)$`)
	release := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	date := regexp.MustCompile(`^ - \d{4}-\d{2}-\d{2}$`)
	hs := heading.FindAllStringSubmatch(read(t, "CHANGELOG.md"), -1)
	if len(hs) == 0 || hs[0][1] != "Unreleased" || hs[0][2] != "" {
		t.Fatalf("CHANGELOG.md must start with a '## [Unreleased]' section, found %v", hs)
	}
	for _, h := range hs[1:] {
		if !release.MatchString(h[1]) || !date.MatchString(h[2]) {
			t.Errorf("CHANGELOG.md heading %q: want '## [X.Y.Z] - YYYY-MM-DD'", h[0])
		}
	}
}

// The workflows call only make targets that `make test` runs: test-all's own (through .ci/run),
// and the release steps tests/install runs at a throwaway tag.
func TestWorkflowsUseTestedTargets(t *testing.T) {
	// make test -> test-all and what it depends on.
	byTestAll := []string{"test", "test-all", "check-generated", "sdk", "schema", "build", "docs", "lint",
		"lint-workflows", "test-go", "tools", "test-nodejs", "sdk-nodejs", "test-python", "python-env", "sdk-python", "py-deps",
		"test-install", "examples", "fuzz", "bench-smoke"}
	// Run by tests/install (TestReleaseAndInstall) in a snapshot at a release tag.
	byInstallTest := []string{"version", "release-notes", "sdk", "dist", "sdk-nodejs", "sdk-python", "release-sdk-tag"}
	tested := map[string]bool{}
	install := read(t, "tests/install/install_test.go")
	makefile := read(t, "Makefile")
	for _, target := range append(byTestAll, byInstallTest...) {
		tested[target] = true
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(makefile) {
			t.Errorf("the Makefile has no target %s", target)
		}
	}
	for _, target := range byInstallTest {
		if !strings.Contains(install, `"`+target+`"`) {
			t.Errorf("tests/install does not run make %s", target)
		}
	}
	for _, target := range byTestAll[2:] {
		// Each is in test-all's prerequisites or a recipe line of one (sdk runs docs, and so on).
		if !regexp.MustCompile(`(?m)^[a-z -]*:.*\b` + regexp.QuoteMeta(target) + `\b|\$\(MAKE\).*\b` + regexp.QuoteMeta(target) + `\b`).MatchString(makefile) {
			t.Errorf("no Makefile rule leads make test to %s", target)
		}
	}
	if !regexp.MustCompile(`(?m)^make test( 2>&1 \|.*)?$`).MatchString(read(t, ".ci/run")) {
		t.Error(".ci/run does not run make test")
	}

	// A make command: at the start of a shell word (not "::error::make ..."), up to a shell operator.
	makeCall := regexp.MustCompile(`(?:^|[\s(;&|])make\s([^\n;&|()"<>]*)`)
	files, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("want ci.yml and release.yml under .github/workflows, found %v (%v)", files, err)
	}
	ranCI := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		ranCI = ranCI || strings.Contains(text, "run: bash .ci/run")
		for _, line := range strings.Split(text, "\n") {
			line, _, _ = strings.Cut(line, " #") // YAML comments
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range makeCall.FindAllStringSubmatch(line, -1) {
				for _, word := range strings.Fields(m[1]) {
					if strings.HasPrefix(word, "-") || strings.Contains(word, "=") || strings.HasPrefix(word, "$") {
						continue
					}
					if !tested[word] {
						t.Errorf("%s runs make %s, which make test never runs", filepath.Base(f), word)
					}
				}
			}
		}
	}
	if !ranCI {
		t.Error("no workflow runs bash .ci/run")
	}
}
