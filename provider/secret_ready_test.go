package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// SecretReady waits until every required key is present, and its outputs name the keys, never a
// value (plain or base64).
func TestSecretReadyKeysAndNoValues(t *testing.T) {
	ns := testenv.Namespace(t, "sec")
	s := newServer(t)
	const marker = "MARKER-plain-s3cret"
	ch := createAsync(t, s, "SecretReady", props("name", "db", "namespace", ns,
		"requiredKeys", strs("username", "password"), "timeout", "60s"))
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {username: %s}", ns, marker))
	mustNotReturn(t, ch, time.Second) // password missing
	sec := testenv.Object(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}", ns))
	cur, err := testenv.Resource(t, sec).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, base64.StdEncoding.EncodeToString([]byte(marker)), "data", "password")
	if _, err := testenv.Resource(t, sec).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "keys"); strings.Join(got, ",") != "password,username" {
		t.Errorf("keys = %v", got)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(marker))
	if all := fmt.Sprint(r.resp.Properties); strings.Contains(all, marker) || strings.Contains(all, b64) {
		t.Error("outputs contain a Secret value")
	}
}
