package provider

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// kubeProxy stands between a provider and the local API server on 127.0.0.1, to make the API
// misbehave on purpose: watch streams that lag, discovery that omits a resource, credentials
// that expire. It forwards with the control plane's admin credentials; the provider talks
// HTTPS to it, authenticating (when token is set) with a bearer token.
type kubeProxy struct {
	url string
	ca  []byte // the proxy's certificate, PEM

	mu         sync.Mutex
	watchDelay time.Duration       // every byte of a watch stream arrives this much later
	hide       map[string][]string // discovery path (/apis/g/v) → resource names it omits
	token      string              // when set, requests must carry it, else 401
	streams    map[io.Closer]bool  // open watch streams, cut by rotate
	unauthz    int                 // 401s answered
	held       string              // a path whose plain GETs are held until their client gives up
	heldGone   chan string         // the path of each held GET, once its client gave up
}

func newKubeProxy(t *testing.T) *kubeProxy {
	t.Helper()
	target, err := url.Parse(testenv.CP.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(testenv.CP.Config)
	if err != nil {
		t.Fatal(err)
	}
	kp := &kubeProxy{hide: map[string][]string{}, streams: map[io.Closer]bool{}, heldGone: make(chan string, 16)}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1
	rp.ModifyResponse = kp.modify
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kp.mu.Lock()
		token := kp.token
		kp.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			kp.mu.Lock()
			kp.unauthz++
			kp.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
			return
		}
		kp.mu.Lock()
		held := kp.held
		kp.mu.Unlock()
		if held != "" && r.Method == http.MethodGet && r.URL.Path == held && r.URL.Query().Get("watch") == "" {
			<-r.Context().Done() // a read that hangs: only its client can end it
			kp.heldGone <- r.URL.Path
			return
		}
		r.Header.Del("Authorization") // the proxy's own admin credentials go upstream
		rp.ServeHTTP(w, r)
	}))
	// TLS: clientcmd applies a kubeconfig's credentials (exec plugins included) only to https servers.
	srv.StartTLS()
	t.Cleanup(srv.Close)
	kp.url = srv.URL
	kp.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return kp
}

// kubeconfig points a provider at the proxy; with exec set, its credentials come from that
// exec plugin (a client.authentication.k8s.io/v1 ExecCredential printer).
func (kp *kubeProxy) kubeconfig(t *testing.T, exec *clientcmdapi.ExecConfig) string {
	t.Helper()
	b, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"proxy": {Server: kp.url, CertificateAuthorityData: kp.ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"proxy": {Exec: exec}},
		Contexts:       map[string]*clientcmdapi.Context{"proxy": {Cluster: "proxy", AuthInfo: "proxy", Namespace: "default"}},
		CurrentContext: "proxy",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (kp *kubeProxy) setWatchDelay(d time.Duration) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.watchDelay = d
}

// hold makes every plain GET of path hang until its client gives up ("": none).
func (kp *kubeProxy) hold(path string) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.held = path
}

func (kp *kubeProxy) hideResource(groupVersion, resource string) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.hide["/apis/"+groupVersion] = append(kp.hide["/apis/"+groupVersion], resource)
}

func (kp *kubeProxy) unhide() {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.hide = map[string][]string{}
}

// rotate makes token the only one accepted and cuts every open watch stream, as an expired
// token and a restarted API server would: clients must list and watch again, with new credentials.
func (kp *kubeProxy) rotate(token string) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.token = token
	for c := range kp.streams {
		_ = c.Close()
	}
	kp.streams = map[io.Closer]bool{}
}

func (kp *kubeProxy) modify(res *http.Response) error {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	q := res.Request.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		kp.streams[res.Body] = true
		res.Body = newLaggingBody(res.Body, func() time.Duration {
			kp.mu.Lock()
			defer kp.mu.Unlock()
			return kp.watchDelay
		})
		return nil
	}
	if hidden := kp.hide[res.Request.URL.Path]; len(hidden) > 0 && res.StatusCode == http.StatusOK {
		var list map[string]any
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &list); err == nil {
			var kept []any
			for _, r := range list["resources"].([]any) {
				name, _ := r.(map[string]any)["name"].(string)
				if !containsPrefix(hidden, name) {
					kept = append(kept, r)
				}
			}
			list["resources"] = kept
			body, _ = json.Marshal(list)
		}
		res.Body = io.NopCloser(strings.NewReader(string(body)))
		res.ContentLength = int64(len(body))
		res.Header.Del("Content-Length")
		res.Header.Del("Content-Encoding")
	}
	return nil
}

// containsPrefix: a hidden resource hides its subresources too (widgets, widgets/status).
func containsPrefix(hidden []string, name string) bool {
	for _, h := range hidden {
		if name == h || strings.HasPrefix(name, h+"/") {
			return true
		}
	}
	return false
}

// laggingBody delivers what the upstream sends, each chunk the delay in force when it arrived
// after it arrived.
type laggingBody struct {
	src    io.ReadCloser
	chunks chan []byte
	buf    []byte
}

func newLaggingBody(src io.ReadCloser, delay func() time.Duration) io.ReadCloser {
	b := &laggingBody{src: src, chunks: make(chan []byte, 1024)}
	go func() {
		defer close(b.chunks)
		for {
			p := make([]byte, 32*1024)
			n, err := src.Read(p)
			if n > 0 {
				due := time.Now().Add(delay())
				chunk := p[:n]
				b.chunks <- append(stampOf(due), chunk...)
			}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func stampOf(t time.Time) []byte {
	s := make([]byte, 8)
	u := uint64(t.UnixNano())
	for i := range s {
		s[i] = byte(u >> (8 * i))
	}
	return s
}

func timeOf(s []byte) time.Time {
	var u uint64
	for i := 0; i < 8; i++ {
		u |= uint64(s[i]) << (8 * i)
	}
	return time.Unix(0, int64(u))
}

func (b *laggingBody) Read(p []byte) (int, error) {
	if len(b.buf) == 0 {
		c, ok := <-b.chunks
		if !ok {
			return 0, io.EOF
		}
		time.Sleep(time.Until(timeOf(c[:8])))
		b.buf = c[8:]
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *laggingBody) Close() error { return b.src.Close() }
