package testregistry

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The registry serves pushes and pulls over TLS with basic auth, and refuses anonymous pulls.
func TestPushAndPull(t *testing.T) {
	r, err := Start(Options{TLS: true, Users: map[string]string{"ci": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.PushIndex("app:v1", "linux/amd64", "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := r.clientOptions()
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(r.Ref("app:v1"))
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != d || !desc.MediaType.IsIndex() {
		t.Fatalf("got %s %s, pushed %s", desc.Digest, desc.MediaType, d)
	}
	if _, err := remote.Get(ref, opts[:1]...); err == nil {
		t.Fatal("anonymous pull passed")
	}
}
