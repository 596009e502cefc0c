package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

// KwokModule is the pinned kwok (tools/kube) whose stage definitions the control plane uses.
const KwokModule = "sigs.k8s.io/kwok@v0.7.0"

// PodReadyDelayAnnotation delays a pod's readiness on the fake nodes: annotate a pod template
// with it ("3s") to play a workload that becomes ready late.
const PodReadyDelayAnnotation = "pod-ready.stage.kwok.x-k8s.io/delay"

// kwokStages builds kwok's configuration from its own "fast" stages (instant pod readiness,
// Job pods that complete, node initialisation and heartbeat), with one change: the pod-ready
// stage waits for the pod's PodReadyDelayAnnotation when it has one, and is instant otherwise.
func kwokStages(ctx context.Context) (string, error) {
	root, err := tools.ModuleSource(ctx, KwokModule)
	if err != nil {
		return "", err
	}
	stage := filepath.Join(root, "kustomize", "stage")
	files := []string{"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml",
		"node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml"}
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(stage, f))
		if err != nil {
			return "", err
		}
		doc := string(b)
		if strings.HasSuffix(f, "pod-ready.yaml") {
			delay := "spec:\n  delay:\n    durationMilliseconds: 0\n    durationFrom:\n      expressionFrom: '.metadata.annotations[\"" +
				PodReadyDelayAnnotation + "\"]'\n"
			if !strings.Contains(doc, "\nspec:\n") {
				return "", fmt.Errorf("unexpected kwok stage layout in %s", f)
			}
			doc = strings.Replace(doc, "\nspec:\n", "\n"+delay, 1)
		}
		docs = append(docs, strings.TrimSpace(doc))
	}
	return strings.Join(docs, "\n---\n") + "\n", nil
}
