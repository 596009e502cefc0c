// Command sdkgen generates the Go, Node.js and Python SDKs from schema.json by calling Pulumi's code
// generators directly: `pulumi package gen-sdk` needs the pulumi-language-go/-nodejs/-python plugins,
// which cannot be installed offline; this does what those plugins do.
//
// Hand-written SDK code lives in an overlay (-overlay, sdk/overlay in this repository): every
// overlay/go/*.go is copied into the Go package (go/readiness/), every overlay/nodejs/*.ts is
// handed to the Node.js generator as an extra file, so it lands beside the generated ones, in
// tsconfig.json's files and in index.ts's exports; every overlay/python/*.py lands in the Python
// package (python/pulumi_readiness/), which the generator's __init__.py imports (`from .<module> import *`). `make sdk` regenerates them like the rest, so
// `make check-generated` fails when a copy in sdk/go or sdk/nodejs was edited instead of the overlay.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noLoader refuses every lookup: our schema is self-contained.
type noLoader struct{}

var errNoRefs = errors.New("the readiness schema references no other package")

func (noLoader) LoadPackage(string, *semver.Version) (*schema.Package, error) { return nil, errNoRefs }
func (noLoader) LoadPackageV2(context.Context, *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, errNoRefs
}
func (noLoader) LoadPackageReference(string, *semver.Version) (schema.PackageReference, error) {
	return nil, errNoRefs
}
func (noLoader) LoadPackageReferenceV2(context.Context, *schema.PackageDescriptor) (schema.PackageReference, error) {
	return nil, errNoRefs
}

func main() {
	schemaPath := flag.String("schema", "schema.json", "the provider schema")
	out := flag.String("out", "sdk", "output folder; go/ and nodejs/ are written under it")
	version := flag.String("version", "0.1.0", "the SDK version")
	overlay := flag.String("overlay", "", "hand-written files to add: <overlay>/go/*.go, <overlay>/nodejs/*.ts and <overlay>/python/*.py")
	flag.Parse()
	if err := run(*schemaPath, *out, *version, *overlay); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgen:", err)
		os.Exit(1)
	}
}

func bind(schemaPath, version string) (*schema.Package, error) {
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		return nil, err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, err
	}
	spec.Version = version
	pkg, diags, err := schema.BindSpec(spec, noLoader{}, schema.ValidationOptions{})
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return pkg, nil
}

// goPackageDir is where the Go generator puts the package (importBasePath's last element).
const goPackageDir = "readiness"

// overlayFiles reads dir's files ending in ext (not recursive) keyed by base name; a missing dir
// is an empty overlay.
func overlayFiles(dir, ext string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}

// addOverlay puts extra into files, refusing to replace a generated file.
func addOverlay(files, extra map[string][]byte, prefix string) error {
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.ToSlash(filepath.Join(prefix, n))
		if _, taken := files[p]; taken {
			return fmt.Errorf("overlay file %s would replace a generated file", p)
		}
		files[p] = extra[n]
	}
	return nil
}

func run(schemaPath, out, version, overlay string) error {
	var goExtra, nodeExtra, pyExtra map[string][]byte
	if overlay != "" {
		var err error
		if goExtra, err = overlayFiles(filepath.Join(overlay, "go"), ".go"); err != nil {
			return err
		}
		if nodeExtra, err = overlayFiles(filepath.Join(overlay, "nodejs"), ".ts"); err != nil {
			return err
		}
		if pyExtra, err = overlayFiles(filepath.Join(overlay, "python"), ".py"); err != nil {
			return err
		}
	}
	// Each generator annotates the package it is given, so bind once per language.
	pkg, err := bind(schemaPath, version)
	if err != nil {
		return err
	}
	goFiles, err := gogen.GeneratePackage("pulumi-readiness-sdkgen", pkg, nil)
	if err != nil {
		return fmt.Errorf("go: %w", err)
	}
	if err := addOverlay(goFiles, goExtra, goPackageDir); err != nil {
		return err
	}
	if err := write(filepath.Join(out, "go"), goFiles); err != nil {
		return err
	}
	pkg, err = bind(schemaPath, version)
	if err != nil {
		return err
	}
	if err := pkg.ImportLanguages(map[string]schema.Language{"nodejs": nodejs.Importer}); err != nil {
		return err
	}
	nodeFiles, err := nodejs.GeneratePackage("pulumi-readiness-sdkgen", pkg, nodeExtra, nil, false, noLoader{})
	if err != nil {
		return fmt.Errorf("nodejs: %w", err)
	}
	if err := write(filepath.Join(out, "nodejs"), nodeFiles); err != nil {
		return err
	}
	if pkg, err = bind(schemaPath, version); err != nil {
		return err
	}
	pyFiles, err := python.GeneratePackage("pulumi-readiness-sdkgen", pkg, pyExtra, noLoader{})
	if err != nil {
		return fmt.Errorf("python: %w", err)
	}
	// pyproject.toml names README.md beside it; the generator writes it into the package only.
	pyFiles["README.md"] = pyFiles[pyPackageDir+"/README.md"]
	return write(filepath.Join(out, "python"), pyFiles)
}

// pyPackageDir is the Python package's folder (the schema's language.python.packageName).
const pyPackageDir = "pulumi_readiness"

// write replaces dir's generated files with files, keeping hand-made ones we add (go.mod).
func write(dir string, files map[string][]byte) error {
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
