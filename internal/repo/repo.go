// Package repo finds this repository's folder, from which the tests, the demo and the
// benchmarks reach its tools modules, test data and charts.
package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/mod/modfile"
)

// Module is the repository's Go module path.
const Module = "github.com/readiness-io/pulumi-readiness"

// Root is the repository's top folder: found from this file's location, or, in a build
// with -trimpath (the Makefile's, see GOFLAGS there: the location is then an import path),
// from the working directory the process started in, up to the repository's go.mod. Outside
// the repository it panics, naming where it looked: every path made from it would be wrong.
func Root() string {
	if rootErr != nil {
		panic(rootErr)
	}
	return root
}

// Found as the process starts, before anything changes its working directory.
var root, rootErr = findRoot()

func findRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("the repository's folder: the working directory: %w", err)
	}
	return rootFrom(dir)
}

// rootFrom is the nearest folder from dir up that holds the repository's go.mod.
func rootFrom(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && isRepoGoMod(b) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s in %s or a folder above it: run this from inside the repository", Module, dir)
		}
	}
}

func isRepoGoMod(b []byte) bool { return modfile.ModulePath(b) == Module }
