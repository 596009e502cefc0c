package tools

// Trims: a dependency module built with some of its files replaced or edited, so a tool or an
// image links less than the module's whole (see tools_trim.go and internal/charts' images).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// ModuleTrim is a dependency module built with some of its files replaced or edited.
type ModuleTrim struct {
	Module string            // its module path, as ModDir's go.mod requires it
	Files  map[string]string // path in the module -> the file's content
	Edits  []FileEdit        // applied in order, after Files
}

// FileEdit replaces Old, which must occur exactly once in the module's file Path, by New: a
// change upstream fails the build, naming the file, rather than building something else.
type FileEdit struct{ Path, Old, New string }

// stamp hashes what the trim changes, for a build's cache key.
func (t *ModuleTrim) stamp(w io.Writer) {
	paths := make([]string, 0, len(t.Files))
	for p := range t.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	fmt.Fprintf(w, "trim %s\n", t.Module)
	for _, p := range paths {
		fmt.Fprintf(w, "%s\n%s\n", p, t.Files[p])
	}
	for _, e := range t.Edits {
		fmt.Fprintf(w, "edit %s\n%q\n%q\n", e.Path, e.Old, e.New)
	}
}

// TrimModule copies t's module from the module cache into scratch, replaces and edits its
// files there, and writes a go.mod (with go.sum) beside it: modDir's, plus a replace directive
// for the copy. The build uses it with -modfile, so modDir stays untouched. (go build -overlay
// would be simpler, but refuses files in the module cache.)
func TrimModule(ctx context.Context, modDir string, t *ModuleTrim, scratch string) (string, error) {
	// `go mod download` (not `go list -m`, which does not download) at the version modDir requires.
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", t.Module)
	dl.Dir = modDir
	out, err := dl.Output()
	if err != nil {
		return "", fmt.Errorf("downloading module %s: %w\n%s", t.Module, err, out)
	}
	var dld struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dld); err != nil || dld.Dir == "" {
		return "", fmt.Errorf("downloading module %s: %v %s", t.Module, err, dld.Error)
	}
	src, dst := dld.Dir, filepath.Join(scratch, "trimmed")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return "", fmt.Errorf("copying module %s: %w", t.Module, err)
	}
	write := func(p string, edit func([]byte) ([]byte, error)) error {
		f := filepath.Join(dst, filepath.FromSlash(p))
		old, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("trimming %s: %w", t.Module, err) // upstream moved it
		}
		b, err := edit(old)
		if err != nil {
			return fmt.Errorf("trimming %s: %s: %w", t.Module, p, err)
		}
		if err := os.Chmod(f, 0o644); err != nil {
			return err
		}
		return os.WriteFile(f, b, 0o644)
	}
	for p, content := range t.Files {
		if err := write(p, func([]byte) ([]byte, error) { return []byte(content), nil }); err != nil {
			return "", err
		}
	}
	for _, e := range t.Edits {
		if err := write(e.Path, func(b []byte) ([]byte, error) { return applyEdit(b, e) }); err != nil {
			return "", err
		}
	}
	mod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return "", err
	}
	modfile := filepath.Join(scratch, "go.mod")
	mod = append(mod, fmt.Sprintf("\nreplace %s => %s\n", t.Module, dst)...)
	if err := os.WriteFile(modfile, mod, 0o644); err != nil {
		return "", err
	}
	return modfile, os.WriteFile(filepath.Join(scratch, "go.sum"), sum, 0o644)
}

// applyEdit is b with e.Old, found exactly once, replaced by e.New.
func applyEdit(b []byte, e FileEdit) ([]byte, error) {
	if n := strings.Count(string(b), e.Old); n != 1 {
		return nil, fmt.Errorf("the text to replace is there %d times, not once (upstream changed?): %q", n, e.Old)
	}
	return []byte(strings.Replace(string(b), e.Old, e.New, 1)), nil
}

// TrimmedDeps lists the packages pkg (built in modDir) links once t is applied: what a trim
// leaves out, without compiling anything.
func TrimmedDeps(ctx context.Context, modDir string, t *ModuleTrim, pkg string) ([]string, error) {
	scratch, err := os.MkdirTemp("", "trim-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	modfile, err := TrimModule(ctx, modDir, t, scratch)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-modfile", modfile, "-deps", pkg)
	cmd.Dir = modDir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	return strings.Fields(string(out)), nil
}
