// Package testregistry runs a real OCI registry on 127.0.0.1 for tests: the distribution
// project's own registry handlers (what the `registry` image serves) over in-memory storage,
// optionally behind TLS from a fresh CA and htpasswd basic auth. It pushes random images with
// go-containerregistry, the client the ImageReady gate uses, so a test can push one late.
package testregistry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"           // auth: htpasswd
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // storage: inmemory

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

// Options configure a registry.
type Options struct {
	// TLS serves HTTPS with a certificate for 127.0.0.1 from a fresh CA (Registry.CAPEM).
	TLS bool
	// Users, when set, turns on htpasswd basic auth: name -> password. Pushes use the first.
	Users map[string]string
}

// Registry is one registry server on 127.0.0.1.
type Registry struct {
	// Host is "127.0.0.1:<port>", the registry part of an image reference.
	Host string
	// CAPEM is the CA that signed the server certificate (TLS only).
	CAPEM []byte

	opts   Options
	app    http.Handler
	tlsCfg *tls.Config
	dir    string

	mu    sync.Mutex
	fd    int // the reserved, not yet listening socket (-1 once serving)
	srv   *http.Server
	extra []*http.Server // ServeOn's
}

// New prepares a registry on a reserved loopback port that refuses connections until Start.
func New(o Options) (*Registry, error) {
	if os.Getenv("TESTREGISTRY_LOG") == "" {
		logrus.SetOutput(io.Discard) // the handlers log every request, and every 404 as an error
	}
	r := &Registry{opts: o, fd: -1}
	port, err := r.reserve(0)
	if err != nil {
		return nil, err
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)

	cfg := &configuration.Configuration{
		Storage: configuration.Storage{"inmemory": configuration.Parameters{}},
	}
	cfg.HTTP.Secret = "testregistry"
	cfg.Log.AccessLog.Disabled = true
	if len(o.Users) > 0 {
		if r.dir, err = os.MkdirTemp("", "testregistry"); err != nil {
			return nil, err
		}
		var lines []string
		for user, pass := range o.Users {
			h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
			if err != nil {
				return nil, err
			}
			lines = append(lines, user+":"+string(h))
		}
		path := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "testregistry", "path": path}}
	}
	if o.TLS {
		c, err := fakes.IssueCertificate("127.0.0.1", 24*time.Hour)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			return nil, err
		}
		r.CAPEM, r.tlsCfg = c.CAPEM, &tls.Config{Certificates: []tls.Certificate{pair}}
	}
	r.app = handlers.NewApp(context.Background(), cfg)
	return r, nil
}

// Start serves the registry (New then Start, when nothing is to be refused first).
func Start(o Options) (*Registry, error) {
	r, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := r.Serve(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// reserve binds a socket without listening: connections to it are refused, as to a registry
// that has not started, and no other process can take the port meanwhile.
func (r *Registry) reserve(port int) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return 0, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return 0, err
	}
	r.fd = fd
	return sa.(*syscall.SockaddrInet4).Port, nil
}

// Serve begins serving on the reserved port.
func (r *Registry) Serve() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return nil
	}
	if err := syscall.Listen(r.fd, 128); err != nil {
		return err
	}
	f := os.NewFile(uintptr(r.fd), "registry")
	r.fd = -1
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return err
	}
	if r.tlsCfg != nil {
		l = tls.NewListener(l, r.tlsCfg)
	}
	r.srv = &http.Server{Handler: r.app, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
	go func(srv *http.Server) { _ = srv.Serve(l) }(r.srv)
	return nil
}

// ServeOn serves the same registry (same storage, TLS and users) on one more listener: a
// real node's containerd reaches it at Host from inside the node's network namespace
// (controlplane.ListenInNamespace). The listener is closed with the registry.
func (r *Registry) ServeOn(l net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tlsCfg != nil {
		l = tls.NewListener(l, r.tlsCfg)
	}
	srv := &http.Server{Handler: r.app, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
	r.extra = append(r.extra, srv)
	go func() { _ = srv.Serve(l) }()
}

// Close stops the registry and frees its port.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
	}
	for _, srv := range r.extra {
		_ = srv.Close()
	}
	if r.fd >= 0 {
		syscall.Close(r.fd)
		r.fd = -1
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// Ref is the full reference of repoAndTag ("app:v1", "app@sha256:...") in this registry.
func (r *Registry) Ref(repoAndTag string) string { return r.Host + "/" + repoAndTag }

// Image is a random single-platform image ("linux/amd64"); its digest is known before any push.
func Image(platform string) (v1.Image, error) {
	img, err := random.Image(512, 1)
	if err != nil {
		return nil, err
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	return mutate.ConfigFile(img, cf)
}

// Index is an OCI image index of one random image per platform.
func Index(platforms ...string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, pl := range platforms {
		img, err := Image(pl)
		if err != nil {
			return nil, err
		}
		p, _ := v1.ParsePlatform(pl)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(empty.Index, adds...), nil
}

// Push writes an image or index (with its blobs and children) to repoAndTag and returns its
// digest.
func (r *Registry) Push(repoAndTag string, artifact any) (string, error) {
	ref, err := name.ParseReference(r.Ref(repoAndTag))
	if err != nil {
		return "", err
	}
	opts, err := r.clientOptions()
	if err != nil {
		return "", err
	}
	switch a := artifact.(type) {
	case v1.Image:
		if err := remote.Write(ref, a, opts...); err != nil {
			return "", err
		}
		d, err := a.Digest()
		return d.String(), err
	case v1.ImageIndex:
		if err := remote.WriteIndex(ref, a, opts...); err != nil {
			return "", err
		}
		d, err := a.Digest()
		return d.String(), err
	}
	return "", fmt.Errorf("cannot push a %T", artifact)
}

// PushImage pushes a random image for platform to repoAndTag; PushIndex an index of platforms.
func (r *Registry) PushImage(repoAndTag, platform string) (string, error) {
	img, err := Image(platform)
	if err != nil {
		return "", err
	}
	return r.Push(repoAndTag, img)
}

func (r *Registry) PushIndex(repoAndTag string, platforms ...string) (string, error) {
	idx, err := Index(platforms...)
	if err != nil {
		return "", err
	}
	return r.Push(repoAndTag, idx)
}

// clientOptions trust the registry's CA and log in as its first user.
func (r *Registry) clientOptions() ([]remote.Option, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if r.CAPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(r.CAPEM) {
			return nil, errors.New("bad CA")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	opts := []remote.Option{remote.WithTransport(tr)}
	if user, pass := r.firstUser(); user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))
	}
	return opts, nil
}

func (r *Registry) firstUser() (string, string) {
	var names []string
	for n := range r.opts.Users {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "", ""
	}
	sort.Strings(names)
	return names[0], r.opts.Users[names[0]]
}

var discardLog = newDiscardLog()

func newDiscardLog() *log.Logger { return log.New(io.Discard, "", 0) }
