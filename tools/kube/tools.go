//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	// The real node (internal/realnode): built only when a test asks for one.
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
	// The fake nodes: here, not in a module of its own, so it shares the build above.
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
