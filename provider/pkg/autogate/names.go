package autogate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Names as pulumi-kubernetes gives them. An object without metadata.name is autonamed: the
// provider names it "<Pulumi name>-<8 random hex>" when it creates it (metadata.AssignNameIfAutonamable
// in pulumi-kubernetes, the engine's default autonaming pattern `${name}-${hex(8)}`), so before it
// exists only the shape of its name is known, and after, only its outputs hold it.

// DryRunName is the name an autonamed object is dry-run under: its Pulumi name and 8 hex of the
// same shape as the provider's suffix, taken from the Pulumi name so that the gate's inputs are
// the same at every `up` (a random one would update the gate each time). A webhook that decides
// on the exact name is no more told the real name than the program is.
func DryRunName(pulumiName string) string {
	sum := sha256.Sum256([]byte(pulumiName))
	return pulumiName + "-" + hex.EncodeToString(sum[:4])
}

// dryRunObject is the object as the kubernetes provider will create it, for an admitted dry-run:
// an autonamed one gets DryRunName (the API server refuses an object with neither name nor
// generateName, so dry-running it as written fails with an error on the gate, not the object).
func dryRunObject(pulumiName string, obj map[string]any) map[string]any {
	md, _ := mapAt(obj, "metadata")
	if str(md, "name") != "" || str(md, "generateName") != "" {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	newMD := make(map[string]any, len(md)+1)
	for k, v := range md {
		newMD[k] = v
	}
	newMD["name"] = DryRunName(pulumiName)
	out["metadata"] = newMD
	return out
}

// installerName is an installer's Kubernetes name as written ("" when autonamed: then only the
// installer's outputs say it, at `outputPath`).
func installerName(inst *Installer) (name, outputPath string) {
	if kindOf(inst.Type, inst.Object) == releaseInstaller {
		// A Release's own name input; autonamed, the provider reports it in status.name.
		return str(inst.Object, "name"), "status.name"
	}
	md, _ := mapAt(inst.Object, "metadata")
	return str(md, "name"), "metadata.name"
}

// nameArg sets args[arg] to an installer's name: as written, or, autonamed, from its outputs.
func nameArg(g *Gate, args map[string]any, arg string, inst *Installer) {
	name, path := installerName(inst)
	if name != "" {
		args[arg] = name
		return
	}
	g.ArgsFrom = append(g.ArgsFrom, ArgFrom{Arg: arg, Installer: inst.ID, Output: path})
}

// clusterSlug is the part of a gate's key and name that says which cluster it is about: the
// Pulumi name of the cluster's kubernetes provider (the last part of its URN).
func clusterSlug(cluster string) string {
	if i := strings.LastIndex(cluster, "::"); i >= 0 {
		cluster = cluster[i+2:]
	}
	return slug(cluster)
}
