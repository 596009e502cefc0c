package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestCredentialsNeverReachTheStateInPlainText (issue 51): a stack gates pulumi-kubernetes
// ConfigMaps (autonamed, as users write them) behind HttpReady gates whose url carries a
// password in its user part, a token in its query, and whose headers carry a bearer token, all
// given as plain strings, as a user pastes them. The gates pass against a real HTTP server that
// demands those credentials; `pulumi stack export` (no --show-secrets), the state file on disk,
// the engine's output (up, preview --diff, refresh) and the provider's trace hold no byte of
// them. A URL without credentials stays plain in the state; a second up changes nothing.
func TestCredentialsNeverReachTheStateInPlainText(t *testing.T) {
	ctx := context.Background()
	const password, token, bearer = "Pw-issue51-4f8a", "Tok-issue51-9c2e", "Bearer-issue51-7d1b"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		ok := (user == "admin" && pass == password) || r.URL.Query().Get("token") == token ||
			r.Header.Get("Authorization") == "Bearer "+bearer || r.URL.Path == "/public"
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	plainURL := srv.URL + "/public"

	env := stacktest.Prepare(t)
	traceFile := filepath.Join(t.TempDir(), "trace")
	env.Vars["READINESS_TRACE"] = traceFile
	ns := testenv.Namespace(t, "creds")
	s := stacktest.NewStack(t, env, "creds", func(ctx *pulumi.Context) error {
		gates := map[string]readiness.HttpReadyArgs{
			"userinfo": {Url: pulumi.String("http://admin:" + password + "@" + host + "/health")},
			"query":    {Url: pulumi.String(srv.URL + "/health?token=" + token)},
			"header": {Url: pulumi.String(srv.URL + "/health"),
				Headers: pulumi.StringMap{"Authorization": pulumi.String("Bearer " + bearer)}},
			"plain": {Url: pulumi.String(plainURL)},
		}
		for name, args := range gates {
			args.Timeout = pulumi.String("30s")
			gate, err := readiness.NewHttpReady(ctx, "api-"+name, &args)
			if err != nil {
				return err
			}
			if _, err := stack.NewKubeFrom(ctx, "app-config-"+name, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"namespace": ns}, "data": map[string]any{"ready": "yes"}},
				pulumi.DependsOn([]pulumi.Resource{gate})); err != nil {
				return err
			}
		}
		return nil
	})
	var out strings.Builder
	if _, err := s.Up(ctx, optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out), optup.Diff()); err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	// A second run finds nothing to change: a url marked secret by the provider compares equal.
	again, err := s.Up(ctx, optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
	if err != nil {
		t.Fatalf("second up: %v\n%s", err, out.String())
	}
	if n := again.Summary.ResourceChanges; n != nil && ((*n)["create"] > 0 || (*n)["replace"] > 0 || (*n)["update"] > 0) {
		t.Errorf("the second up changed resources: %v", *n)
	}
	if _, err := s.Preview(ctx, optpreview.ProgressStreams(&out), optpreview.Diff()); err != nil {
		t.Fatalf("preview: %v", err)
	}
	if _, err := s.Refresh(ctx, optrefresh.ProgressStreams(&out)); err != nil {
		t.Fatalf("refresh: %v\n%s", err, out.String())
	}
	exported, err := stacktest.ExportAsStored(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk strings.Builder
	_ = filepath.Walk(filepath.Join(env.Dir, "state"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(path)
			onDisk.Write(b)
		}
		return nil
	})
	trace, err := os.ReadFile(traceFile)
	if err != nil || len(trace) == 0 {
		t.Fatalf("the provider wrote no trace (%v): the test would prove nothing of it", err)
	}
	for name, text := range map[string]string{"stack export": exported, "the state on disk": onDisk.String(),
		"the engine's output": out.String(), "the provider's trace": string(trace)} {
		for _, secret := range []string{password, token, bearer} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", name, secret)
			}
		}
	}
	if !strings.Contains(exported, plainURL) {
		t.Errorf("a URL without credentials should stay plain in the state; stack export does not show %s", plainURL)
	}
	if !strings.Contains(exported, "4dabf18193072939515e22adb298388d") { // the secret signature
		t.Errorf("stack export holds no secret at all: the credentials were dropped, not kept secret")
	}
	if strings.Count(exported, `"url"`) < 8 { // inputs and outputs of four gates
		t.Errorf("the gates' url should be in the state (as secrets where they carry credentials):\n%s", exported)
	}
}
