package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestNoSecretValueLeaks plants a marker in a Secret and runs gates that read it, pass and time
// out on it; the marker (plain or base64) must appear in no output, progress line, error or
// checkpoint.
func TestNoSecretValueLeaks(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	ns := testenv.Namespace(t, "leak")
	const marker = "MARKER-pl4nted-s3cret-value"
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: %s, username: admin}", ns, marker))

	run := func(name string, program pulumi.RunFunc) string {
		s, err := env.Stack(ctx, "leak", name, string(testenv.CP.Kubeconfig), program)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		_, upErr := s.Up(ctx, optup.ProgressStreams(&out), optup.ErrorProgressStreams(&errOut))
		state, err := s.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(state)
		_, _ = s.Destroy(ctx, optdestroy.Remove())
		return fmt.Sprint(out.String(), errOut.String(), upErr, string(b))
	}
	passing := run("pass", func(ctx *pulumi.Context) error {
		sec, err := readiness.NewSecretReady(ctx, "db", &readiness.SecretReadyArgs{Name: pulumi.String("db"), Namespace: pulumi.String(ns),
			RequiredKeys: pulumi.StringArray{pulumi.String("password")}})
		if err != nil {
			return err
		}
		res, err := readiness.NewResourceReady(ctx, "db-any", &readiness.ResourceReadyArgs{ApiVersion: pulumi.String("v1"), Kind: pulumi.String("Secret"),
			Namespace: pulumi.String(ns), Name: pulumi.String("db"), JsonPath: pulumi.String("{.data.password}")})
		ctx.Export("keys", sec.Keys)
		ctx.Export("matched", res.Matched)
		return err
	})
	failing := run("fail", func(ctx *pulumi.Context) error {
		_, err := readiness.NewSecretReady(ctx, "db", &readiness.SecretReadyArgs{Name: pulumi.String("db"), Namespace: pulumi.String(ns),
			RequiredKeys: pulumi.StringArray{pulumi.String("token")}, Timeout: pulumi.String("2s")})
		if err != nil {
			return err
		}
		_, err = readiness.NewResourceReady(ctx, "db-value", &readiness.ResourceReadyArgs{ApiVersion: pulumi.String("v1"), Kind: pulumi.String("Secret"),
			Namespace: pulumi.String(ns), Name: pulumi.String("db"), JsonPath: pulumi.String("{.data.token}"), Timeout: pulumi.String("2s")})
		return err
	})
	if !strings.Contains(failing, "timed out") {
		t.Fatalf("the failing stack did not time out as planned:\n%s", failing)
	}
	for _, leak := range []string{marker, base64.StdEncoding.EncodeToString([]byte(marker))} {
		for name, text := range map[string]string{"passing": passing, "failing": failing} {
			if strings.Contains(text, leak) {
				t.Errorf("the %s stack leaked the Secret value (%q) into its output, errors or state", name, leak)
			}
		}
	}
}

// TestKubeconfigThatFailsToLoadLeaksNothing: a kubeconfig given base64-encoded (taken for a path)
// used to be echoed in part, cut where Pulumi's masking could no longer match it. No piece of the
// value may appear in the stack's output or errors.
func TestKubeconfigThatFailsToLoadLeaksNothing(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	value := base64.StdEncoding.EncodeToString(testenv.CP.Kubeconfig)
	s, err := env.Stack(ctx, "leak", "kubeconfig-b64", value, func(ctx *pulumi.Context) error {
		_, err := readiness.NewNodesReady(ctx, "nodes", &readiness.NodesReadyArgs{Timeout: pulumi.String("5s")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	_, upErr := s.Up(ctx, optup.ProgressStreams(&out), optup.ErrorProgressStreams(&errOut))
	if upErr == nil {
		t.Fatal("up passed with a base64-encoded kubeconfig")
	}
	// The state is not searched: the Automation API exports it with secrets decrypted, and the
	// provider's own kubeconfig input is kept there (encrypted on disk) by design.
	_, _ = s.Destroy(ctx, optdestroy.Remove())
	text := fmt.Sprint(out.String(), errOut.String(), upErr)
	if !strings.Contains(text, "base64-encoded kubeconfig") {
		t.Errorf("the error does not say what is wrong:\n%s", text)
	}
	for i := 0; i+8 <= len(value); i++ {
		if frag := value[i : i+8]; strings.Contains(text, frag) {
			t.Fatalf("the output holds %q, a piece of the kubeconfig value:\n%s", frag, text)
		}
	}
}
