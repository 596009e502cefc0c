package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

func repoSchema(t *testing.T) Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The committed Registry docs are what docgen makes from the committed schema.json and examples,
// and they name every resource and every configuration key.
func TestRegistryDocsMatchSchema(t *testing.T) {
	s := repoSchema(t)
	var all strings.Builder
	for _, name := range []string{"_index.md", "installation-configuration.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Render(s, string(b), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, p)) })
		if err != nil {
			t.Fatalf("docs/%s: %v", name, err)
		}
		if got != string(b) {
			t.Errorf("docs/%s is out of date with schema.json or examples/: run make docs (make sdk runs it)", name)
		}
		all.WriteString(got)
	}
	for token := range s.Resources {
		name := typeName(token)
		for _, use := range []string{"`readiness.New" + name + "`", "`new readiness." + name + "`", "`readiness." + name + "`"} {
			if !strings.Contains(all.String(), use) {
				t.Errorf("the docs do not list %s as %s", name, use)
			}
		}
	}
	// The overview shows its example in every SDK's language, each from examples/.
	for _, file := range []string{"examples/cert-manager/ts/index.ts", "examples/cert-manager/python/__main__.py", "examples/cert-manager/go/main.go"} {
		if !strings.Contains(all.String(), "<!-- generated: file "+file+" -->") {
			t.Errorf("the docs do not show %s", file)
		}
	}
	for key := range s.Config.Variables {
		if !strings.Contains(all.String(), "`readiness:"+key+"`") {
			t.Errorf("the docs do not list the configuration key readiness:%s", key)
		}
	}
}

func TestRender(t *testing.T) {
	s := Schema{Name: "readiness"}
	s.Config.Variables = map[string]Property{
		"kubeconfig": {Type: "string", Secret: true, Description: "A kubeconfig | path."},
		"context":    {Type: "string", Description: "The context."},
	}
	s.Resources = map[string]Resource{
		"readiness:index:CrdReady":         {Description: "Waits until CRDs are Established. More text."},
		"readiness:index:CertManagerReady": {Description: "One line (e.g. `a. b` c). More.", IsComponent: true},
	}
	files := map[string]string{
		"examples/x/main.go":     "package main\n\nfunc f() { readiness.NewCrdReady(ctx) }\n",
		"examples/x/index.ts":    "new readiness.CrdReady(\"x\", {});\n",
		"examples/x/__main__.py": "readiness.CrdReady(\"x\", group=\"g\")\n",
		"examples/y/__main__.py": "readiness.NodeReady(\"x\")\n",
		"examples/x/Pulumi.yaml": "name: x\n",
	}
	readFile := func(p string) ([]byte, error) {
		if b, ok := files[p]; ok {
			return []byte(b), nil
		}
		return nil, errors.New("no file " + p)
	}
	const front = "---\ntitle: T\nmeta_desc: D\nlayout: package\n---\n"
	for _, tc := range []struct {
		name, doc, want, err string
	}{
		{name: "config table, keys sorted, secrets marked, pipes escaped",
			doc: front + "<!-- generated: config -->\nold\n<!-- end generated: config -->\n",
			want: front + "<!-- generated: config -->\n| Key | Type | Description |\n| --- | --- | --- |\n" +
				"| `readiness:context` | string | The context. |\n" +
				"| `readiness:kubeconfig` | string (secret) | A kubeconfig \\| path. |\n<!-- end generated: config -->\n"},
		{name: "resource table, first sentences, components marked",
			doc: front + "<!-- generated: resources -->\n<!-- end generated: resources -->\n",
			want: front + "<!-- generated: resources -->\n| Resource | Go | TypeScript | Python | Description |\n| --- | --- | --- | --- | --- |\n" +
				"| `CertManagerReady` (component) | `readiness.NewCertManagerReady` | `new readiness.CertManagerReady` | `readiness.CertManagerReady` | One line (e.g. `a. b` c). |\n" +
				"| `CrdReady` | `readiness.NewCrdReady` | `new readiness.CrdReady` | `readiness.CrdReady` | Waits until CRDs are Established. |\n<!-- end generated: resources -->\n"},
		{name: "file block",
			doc:  front + "<!-- generated: file examples/x/main.go -->\n```go\nstale\n```\n<!-- end generated: file -->\n",
			want: front + "<!-- generated: file examples/x/main.go -->\n```go\n" + files["examples/x/main.go"] + "```\n<!-- end generated: file -->\n"},
		{name: "TypeScript file block",
			doc:  front + "<!-- generated: file examples/x/index.ts -->\n<!-- end generated: file -->\n",
			want: front + "<!-- generated: file examples/x/index.ts -->\n```typescript\n" + files["examples/x/index.ts"] + "```\n<!-- end generated: file -->\n"},
		{name: "Python file block",
			doc:  front + "<!-- generated: file examples/x/__main__.py -->\n```python\nstale\n```\n<!-- end generated: file -->\n",
			want: front + "<!-- generated: file examples/x/__main__.py -->\n```python\n" + files["examples/x/__main__.py"] + "```\n<!-- end generated: file -->\n"},
		{name: "a file of another extension has no language",
			doc:  front + "<!-- generated: file examples/x/Pulumi.yaml -->\n<!-- end generated: file -->\n",
			want: front + "<!-- generated: file examples/x/Pulumi.yaml -->\n```\n" + files["examples/x/Pulumi.yaml"] + "```\n<!-- end generated: file -->\n"},
		{name: "untouched text stays", doc: front + "new readiness.CrdReady(\"x\", {})\n", want: front + "new readiness.CrdReady(\"x\", {})\n"},
		{name: "a resource the schema lacks", doc: front + "new readiness.AdmisionReady(\"x\", {})\n", err: "readiness.AdmisionReady"},
		{name: "a Go resource the schema lacks", doc: front + "readiness.NewNodeReady(ctx)\n", err: "readiness.NodeReady"},
		{name: "a Python resource the schema lacks", doc: front + "readiness.NodeReady(\"x\")\n", err: "readiness.NodeReady"},
		{name: "a Python example using a resource the schema lacks",
			doc: front + "<!-- generated: file examples/y/__main__.py -->\n<!-- end generated: file -->\n", err: "readiness.NodeReady"},
		{name: "unknown block", doc: front + "<!-- generated: outputs -->\n<!-- end generated: outputs -->\n", err: `unknown generated block "outputs"`},
		{name: "mismatched end", doc: front + "<!-- generated: config -->\n<!-- end generated: resources -->\n", err: "ends as"},
		{name: "missing file", doc: front + "<!-- generated: file nope.go -->\n<!-- end generated: file -->\n", err: "no file nope.go"},
		{name: "no front matter", doc: "# Readiness\n", err: "no front matter"},
		{name: "front matter without layout", doc: "---\ntitle: T\nmeta_desc: D\n---\n", err: "lacks layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(s, tc.doc, readFile)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestFirstSentence(t *testing.T) {
	for in, want := range map[string]string{
		"One. Two.": "One.",
		"Reads `sh.helm.release.v1.<n>.v<N>`. Then.": "Reads `sh.helm.release.v1.<n>.v<N>`.",
		"A (e.g. a fresh one) and i.e. this. Next.":  "A (e.g. a fresh one) and i.e. this.",
		"No period at all":                           "No period at all",
		"Wrapped\n  over lines. Next.":               "Wrapped over lines.",
		"Code `a. b` inside. Next.":                  "Code `a. b` inside.",
		"Ends with a version v1.2.3 here. Next one.": "Ends with a version v1.2.3 here.",
		"Trailing period.":                           "Trailing period.",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}
