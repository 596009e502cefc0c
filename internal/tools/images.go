package tools

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// GoImage is a container image made here from one Go main package: a static binary in an
// otherwise empty image, as distroless images are. No image can be pulled from outside, so
// the controllers' images are made from their Go modules under the names their charts use,
// and loaded into the node (LoadImage), as `kind load` does for an air-gapped cluster.
type GoImage struct {
	// Ref is the image's name, exactly as the chart or manifest references it.
	Ref string
	// ModDir is the module folder to build in; Pkg the main package, from ModDir.
	ModDir, Pkg string
	// Args come after the binary in the entrypoint.
	Args []string
	// Env is added to the build's environment (GOFLAGS, GONOSUMDB...).
	Env []string
	// Trim replaces files of one dependency module for this build, by path in that module:
	// a controller that links every integration it supports through one registry file
	// (External Secrets' providers) is built with the ones our stacks use, which is most of
	// the cost of a cold build. Nothing else of the module changes.
	Trim *ModuleTrim
}

// BuildImage builds img's binary and writes the image as a docker-archive tar in the tools
// cache, keyed on the module's go.mod/go.sum (and local sources), so a warm run reuses it.
func BuildImage(ctx context.Context, img GoImage, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	stamp, err := imageStamp(img)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(), "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base := strings.NewReplacer("/", "_", ":", "_", "@", "_").Replace(img.Ref)
	out := filepath.Join(dir, base+"-"+stamp[:16]+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	// One build of an image at a time across processes (make test's Go and TypeScript real-node
	// tests may both want it on a cold machine): the second finds it built.
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := Lock(ctx, lock); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	start := time.Now()
	logf("building image %s from %s ...", img.Ref, img.Pkg)
	scratch, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	binName := binaryName(img.Pkg)
	args := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(scratch, binName)}
	if img.Trim != nil {
		modfile, err := TrimModule(ctx, img.ModDir, img.Trim, scratch)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", img.Ref, err)
		}
		args = append(args, "-modfile", modfile)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, img.Pkg)...)
	cmd.Dir = img.ModDir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), img.Env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s for image %s: %v\n%s", img.Pkg, img.Ref, err, b)
	}
	bin, err := os.ReadFile(filepath.Join(scratch, binName))
	if err != nil {
		return "", err
	}
	if err := writeImage(out+".tmp", img.Ref, "/"+binName, bin, img.Args); err != nil {
		return "", err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", err
	}
	logf("built image %s in %s", img.Ref, time.Since(start).Round(time.Second))
	return out, nil
}

// writeImage writes a one-layer image holding the binary at path (and a /tmp), run as a
// non-root user (charts ask for runAsNonRoot), as a docker-archive tar tagged ref.
func writeImage(out, ref, path string, bin []byte, args []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime},
		{Name: strings.TrimPrefix(path, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mtime},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{
		Entrypoint: append([]string{path}, args...),
		User:       "65532:65532",
		Env:        []string{"PATH=/"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// imageStamp hashes what decides an image: its name, package and arguments, the module's
// go.mod/go.sum, a local package's sources, and the Go version.
func imageStamp(img GoImage) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%q\n%q\n%s\n", img.Ref, img.Pkg, img.Args, img.Env, runtime.Version())
	if img.Trim != nil {
		img.Trim.stamp(h)
	}
	files := []string{"go.mod", "go.sum"}
	if strings.HasPrefix(img.Pkg, ".") {
		m, _ := filepath.Glob(filepath.Join(img.ModDir, img.Pkg, "*.go"))
		for _, f := range m {
			rel, _ := filepath.Rel(img.ModDir, f)
			files = append(files, rel)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(img.ModDir, f))
		if err != nil {
			return "", fmt.Errorf("image %s: %w", img.Ref, err)
		}
		h.Write([]byte(f))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
