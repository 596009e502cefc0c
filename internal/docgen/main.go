// Command docgen keeps the Pulumi Registry docs (docs/_index.md, docs/installation-configuration.md)
// in step with schema.json and the examples: it rewrites the blocks between `<!-- generated: NAME -->`
// and `<!-- end generated: NAME -->`: `resources` (the resource table), `config` (the configuration
// table) and `file PATH` (a file of the repository as a code block, fenced by its extension: go,
// typescript, python; the overview's examples are examples/ programs, which the tests run). It
// refuses docs that use a resource the schema does not have. `make sdk` runs it, so
// `make check-generated` sees docs that drift; `-check` only reports.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Schema is the part of a Pulumi package schema the docs are made of.
type Schema struct {
	Name   string `json:"name"`
	Config struct {
		Variables map[string]Property `json:"variables"`
	} `json:"config"`
	Resources map[string]Resource `json:"resources"`
}

// Property is one configuration variable.
type Property struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	Secret      bool   `json:"secret"`
	Default     any    `json:"default"`
}

// Resource is one resource or component.
type Resource struct {
	Description string `json:"description"`
	IsComponent bool   `json:"isComponent"`
}

func main() {
	schemaPath := flag.String("schema", "schema.json", "the provider schema")
	docs := flag.String("docs", "docs", "folder of the Registry docs")
	root := flag.String("root", ".", "the repository, for `file PATH` blocks")
	check := flag.Bool("check", false, "only report docs that are out of date")
	flag.Parse()
	if err := run(*schemaPath, *docs, *root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(schemaPath, docs, root string, check bool) error {
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var s Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", schemaPath, err)
	}
	var stale []string
	for _, name := range []string{"_index.md", "installation-configuration.md"} {
		path := filepath.Join(docs, name)
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		updated, err := Render(s, string(old), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, p)) })
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if updated == string(old) {
			continue
		}
		if check {
			stale = append(stale, path)
			continue
		}
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("out of date with %s and examples/ (run make docs): %s", schemaPath, strings.Join(stale, ", "))
	}
	return nil
}

var (
	blockRe = regexp.MustCompile(`(?s)(<!-- generated: ([a-z]+)(?: ([^ ]+))? -->\n).*?(<!-- end generated: ([a-z]+) -->)`)
	// A hand-written example's use of a resource: readiness.NewCrdReady( in Go, new readiness.CrdReady( in TypeScript,
	// readiness.CrdReady( in Python.
	useRe = regexp.MustCompile(`readiness\.(?:New)?([A-Z][A-Za-z]*)\(`)
)

// Render returns doc with its generated blocks rewritten from s (and readFile, for `file PATH`
// blocks). It fails on a block it does not know, on front matter the Registry needs but doc lacks,
// and on code using a resource s does not have.
func Render(s Schema, doc string, readFile func(path string) ([]byte, error)) (string, error) {
	if err := checkFrontMatter(doc); err != nil {
		return "", err
	}
	var err error
	out := blockRe.ReplaceAllStringFunc(doc, func(block string) string {
		m := blockRe.FindStringSubmatch(block)
		name, arg, end := m[2], m[3], m[5]
		if name != end {
			err = fmt.Errorf("generated block %q ends as %q", name, end)
			return block
		}
		var body string
		switch {
		case name == "resources" && arg == "":
			body = resourceTable(s)
		case name == "config" && arg == "":
			body = configTable(s)
		case name == "file" && arg != "":
			b, ferr := readFile(arg)
			if ferr != nil {
				err = ferr
				return block
			}
			lang := map[string]string{".go": "go", ".ts": "typescript", ".py": "python"}[filepath.Ext(arg)]
			body = "```" + lang + "\n" + strings.TrimRight(string(b), "\n") + "\n```\n"
		default:
			err = fmt.Errorf("unknown generated block %q", strings.TrimSpace(name+" "+arg))
			return block
		}
		return m[1] + body + m[4]
	})
	if err != nil {
		return "", err
	}
	resources := map[string]bool{}
	for token := range s.Resources {
		resources[typeName(token)] = true
	}
	for _, m := range useRe.FindAllStringSubmatch(out, -1) {
		if !resources[m[1]] {
			return "", fmt.Errorf("the docs use readiness.%s, which schema.json does not have", m[1])
		}
	}
	return out, nil
}

func checkFrontMatter(doc string) error {
	rest, ok := strings.CutPrefix(doc, "---\n")
	if !ok {
		return fmt.Errorf("no front matter")
	}
	fm, _, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		return fmt.Errorf("front matter not closed")
	}
	for _, key := range []string{"title", "meta_desc", "layout"} {
		if !regexp.MustCompile(`(?m)^` + key + `: \S`).MatchString(fm) {
			return fmt.Errorf("front matter lacks %s", key)
		}
	}
	return nil
}

func resourceTable(s Schema) string {
	var b bytes.Buffer
	b.WriteString("| Resource | Go | TypeScript | Python | Description |\n| --- | --- | --- | --- | --- |\n")
	for _, token := range sorted(s.Resources) {
		r := s.Resources[token]
		name := typeName(token)
		kind := ""
		if r.IsComponent {
			kind = " (component)"
		}
		// Python's class has the schema's name (pulumi_readiness, imported as readiness).
		fmt.Fprintf(&b, "| `%s`%s | `readiness.New%s` | `new readiness.%s` | `readiness.%s` | %s |\n", name, kind, name, name, name, cell(firstSentence(r.Description)))
	}
	return b.String()
}

func configTable(s Schema) string {
	var b bytes.Buffer
	b.WriteString("| Key | Type | Description |\n| --- | --- | --- |\n")
	for _, key := range sorted(s.Config.Variables) {
		v := s.Config.Variables[key]
		typ := v.Type
		if v.Secret {
			typ += " (secret)"
		}
		fmt.Fprintf(&b, "| `%s:%s` | %s | %s |\n", s.Name, key, typ, cell(v.Description))
	}
	return b.String()
}

func typeName(token string) string { return token[strings.LastIndex(token, ":")+1:] }

// firstSentence ends at the first ". " outside backticks that does not close an abbreviation.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	inCode := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '`':
			inCode = !inCode
		case s[i] == '.' && !inCode && (i+1 == len(s) || s[i+1] == ' '):
			if strings.HasSuffix(s[:i], "e.g") || strings.HasSuffix(s[:i], "i.e") {
				continue
			}
			return s[:i+1]
		}
	}
	return s
}

func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
