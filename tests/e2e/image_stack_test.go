package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/testregistry"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestImageReadyStack is field report 003: the Deployment is created only after CI pushed its
// image (late, to a real registry on 127.0.0.1 behind TLS and basic auth), and it runs the
// image pinned by the digest the gate resolved, not the tag.
func TestImageReadyStack(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	reg, err := testregistry.Start(testregistry.Options{TLS: true, Users: map[string]string{"ci": "e2e-registry-pass"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ns := testenv.Namespace(t, "images")
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, base64.StdEncoding.EncodeToString([]byte("ci:e2e-registry-pass")))
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: regcred, namespace: %s}\ntype: kubernetes.io/dockerconfigjson\n"+
		"data: {.dockerconfigjson: %s}", ns, base64.StdEncoding.EncodeToString([]byte(cfg))))

	program := func(ctx *pulumi.Context) error {
		img, err := readiness.NewImageReady(ctx, "api-image", &readiness.ImageReadyArgs{
			Image:         pulumi.String(reg.Ref("api:1.4.2")),
			Platform:      pulumi.String("linux/amd64"),
			PullSecret:    &readiness.ImagePullSecretArgs{Namespace: pulumi.String(ns), Name: pulumi.String("regcred")},
			CaCertificate: pulumi.String(string(reg.CAPEM)),
			Timeout:       pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		// The Deployment runs the gate's pinned digest (an output inside the object).
		deployment := map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "api", "namespace": ns},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "api"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "api"}},
					"spec": map[string]any{
						"nodeSelector":     map[string]any{"type": "kwok"},
						"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
						"containers":       []any{map[string]any{"name": "api", "image": img.Pinned}},
					},
				},
			},
		}
		dep, err := stack.NewKubeFrom(ctx, "api", deployment, pulumi.DependsOn([]pulumi.Resource{img}))
		if err != nil {
			return err
		}
		ctx.Export("digest", img.Digest)
		ctx.Export("platformDigest", img.PlatformDigest)
		ctx.Export("deploymentCreatedAt", dep.CreationTimestamp())
		return nil
	}
	s := stacktest.NewStack(t, env, "images", program)

	// Play CI: the image is pushed a while after `pulumi up` started.
	type push struct {
		from   time.Time
		digest string
		err    error
	}
	pushed := make(chan push, 1)
	go func() {
		stacktest.SleepToSecond(3 * time.Second)
		from := time.Now()
		d, err := reg.PushIndex("api:1.4.2", "linux/amd64", "linux/arm64")
		pushed <- push{from, d, err}
	}()
	var out strings.Builder
	res, err := s.Up(ctx, optup.ProgressStreams(&out))
	ps := <-pushed
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	if ps.err != nil {
		t.Fatalf("push: %v", ps.err)
	}
	digest, pushedFrom := ps.digest, ps.from
	if got := res.Outputs["digest"].Value; got != digest {
		t.Errorf("digest = %v, pushed %s", got, digest)
	}
	if got, _ := res.Outputs["platformDigest"].Value.(string); !strings.HasPrefix(got, "sha256:") || got == digest {
		t.Errorf("platformDigest = %q: want the linux/amd64 image's digest", got)
	}
	depAt := stacktest.OutputTime(t, res, "deploymentCreatedAt")
	if stacktest.CreatedBefore(depAt, pushedFrom) {
		t.Errorf("the Deployment (%s) was created before the image was pushed (%s)", depAt, pushedFrom)
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	dep, err := testenv.Dynamic(t).Resource(deployments).Namespace(ns).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("containers: %v", containers)
	}
	if got, want := containers[0].(map[string]any)["image"], reg.Ref("api@"+digest); got != want {
		t.Errorf("the Deployment runs %v, want the pinned %s", got, want)
	}
}
