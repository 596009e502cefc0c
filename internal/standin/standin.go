// Package standin is a test-only Pulumi provider ("kubetest") that creates Kubernetes objects
// from manifests inside a stack, standing in for pulumi-kubernetes, whose plugin cannot be
// installed offline. It behaves like `kubectl create`: no retries, so an object applied before
// its CRD or webhook is ready fails exactly as it would for a user.
package standin

import (
	"context"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// New builds the kubetest provider.
func New() (p.Provider, error) {
	return infer.NewProviderBuilder().
		WithConfig(infer.Config(&Config{})).
		WithResources(infer.Resource(&Object{})).
		WithModuleMap(map[tokens.ModuleName]tokens.ModuleName{"standin": "index"}).
		Build()
}

type Config struct {
	Kubeconfig string `pulumi:"kubeconfig" provider:"secret"`
}

type Object struct{}

type ObjectArgs struct {
	// Manifest is one object as YAML or JSON.
	Manifest string `pulumi:"manifest"`
}

type ObjectState struct {
	ObjectArgs
	Name              string `pulumi:"name"`
	Namespace         string `pulumi:"namespace"`
	UID               string `pulumi:"uid"`
	CreationTimestamp string `pulumi:"creationTimestamp"`
	// CreatedAt is when Create returned, with nanoseconds (the API's timestamps are seconds).
	CreatedAt string `pulumi:"createdAt"`
}

func (*Object) Create(ctx context.Context, req infer.CreateRequest[ObjectArgs]) (infer.CreateResponse[ObjectState], error) {
	st := ObjectState{ObjectArgs: req.Inputs}
	if req.DryRun {
		return infer.CreateResponse[ObjectState]{Output: st}, nil
	}
	obj, ri, err := resolve(ctx, req.Inputs.Manifest)
	if err != nil {
		return infer.CreateResponse[ObjectState]{}, err
	}
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return infer.CreateResponse[ObjectState]{}, fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	st.Name, st.Namespace, st.UID = created.GetName(), created.GetNamespace(), string(created.GetUID())
	st.CreationTimestamp = created.GetCreationTimestamp().UTC().Format(time.RFC3339)
	st.CreatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	return infer.CreateResponse[ObjectState]{ID: st.Namespace + "/" + st.Name, Output: st}, nil
}

func (*Object) Delete(ctx context.Context, req infer.DeleteRequest[ObjectState]) (infer.DeleteResponse, error) {
	obj, ri, err := resolve(ctx, req.State.Manifest)
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return infer.DeleteResponse{}, err
	}
	return infer.DeleteResponse{}, nil
}

func resolve(ctx context.Context, manifest string) (*unstructured.Unstructured, dynamic.ResourceInterface, error) {
	j, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		return nil, nil, err
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(j, &m); err != nil {
		return nil, nil, err
	}
	obj := &unstructured.Unstructured{Object: m}
	cfg, ns, err := kube.LoadConfig(kube.Settings{Kubeconfig: infer.GetConfig[Config](ctx).Kubeconfig})
	if err != nil {
		return nil, nil, err
	}
	c, err := kube.NewClients(cfg, ns, 0)
	if err != nil {
		return nil, nil, err
	}
	mapping, err := c.Mapping(obj.GroupVersionKind())
	if err != nil {
		return nil, nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(ns)
		}
		return obj, c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
	}
	return obj, c.Dynamic.Resource(mapping.Resource), nil
}
