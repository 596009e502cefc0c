package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/testregistry"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

// TestProgram runs the example as it is against the local control plane: the registry is a real
// one on 127.0.0.1 with basic auth (config `imageRepository`), the pods' pull Secret holds its
// credentials, and CI (played) pushes the multi-platform image 3 s after `pulumi up` started.
// The Deployment must run exactly the digest that was pushed.
func TestProgram(t *testing.T) {
	reg, err := testregistry.Start(testregistry.Options{Users: map[string]string{"ci": "examples-registry-pass"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	auth := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, base64.StdEncoding.EncodeToString([]byte("ci:examples-registry-pass")))
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}")
	testenv.Apply(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: ghcr-pull-secret, namespace: apps}\ntype: kubernetes.io/dockerconfigjson\n"+
		"data: {.dockerconfigjson: "+base64.StdEncoding.EncodeToString([]byte(auth))+"}")

	const tag = "3f2a9c1"
	s := run.Stack(t, "readiness-example-image", map[string]string{"imageTag": tag, "imageRepository": reg.Ref("acme/api")}, Program)
	pushed := make(chan string, 1)
	go func() {
		time.Sleep(3 * time.Second) // CI is still building when `pulumi up` starts
		digest, err := reg.PushIndex("acme/api:"+tag, "linux/amd64", "linux/arm64")
		if err != nil {
			t.Error(err)
		}
		pushed <- digest
	}()
	res := run.Up(t, s)
	digest := <-pushed
	if got := res.Outputs["digest"].Value; got != digest {
		t.Errorf("digest = %v, want the pushed %s", got, digest)
	}
	d, err := testenv.CP.Client.AppsV1().Deployments("apps").Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arm64, _ := res.Outputs["arm64Digest"].Value.(string)
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, reg.Ref("acme/api")+"@sha256:") ||
		(!strings.HasSuffix(img, digest) && !strings.HasSuffix(img, arm64)) {
		t.Errorf("the Deployment runs %s, want %s pinned by the gate's digest", img, reg.Ref("acme/api"))
	}
	run.Destroy(t, s)
}
