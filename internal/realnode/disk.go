package realnode

import (
	"fmt"
	"os"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// The real node's kubelet and containerd keep their files in the cluster's folder, on the
// host's disk. Below the kubelet's eviction threshold (evictionHard nodefs.available and
// imagefs.available, kubeletConfig) the kubelet reports DiskPressure, the node is tainted and
// no pod is admitted: a test then sees only pods that never start, or a pod's first event
// naming a Secret "not registered". A node refuses to start short of that, saying so.
const (
	// evictionPercent is kubeletConfig's evictionHard nodefs.available and imagefs.available.
	evictionPercent = 1
	// nodeDiskHeadroom is what a node writes above the threshold while it runs: the images
	// it unpacks (the controllers' about 250 MB, twice: archive and snapshot), pod logs and
	// emptyDirs, and what the builds beside it add to the same disk.
	nodeDiskHeadroom = 2 << 30
)

// nodeDiskShortfall says why a disk of total bytes with avail free is too full for a real
// node ("" when it is not): the kubelet's threshold plus nodeDiskHeadroom must be free.
func nodeDiskShortfall(dir string, total, avail uint64) string {
	threshold := total * evictionPercent / 100
	if avail >= threshold+nodeDiskHeadroom {
		return ""
	}
	return fmt.Sprintf("the disk of %s has %s free of %s: a real node's kubelet admits no pod below %s "+
		"(evictionHard %d%%) and the node needs about %s more for its images and pods; free some space "+
		"on it (go clean -cache; clusters' folders left in %s, readiness-cp-*) and start again",
		dir, size(avail), size(total), size(threshold), evictionPercent, size(nodeDiskHeadroom), os.TempDir())
}

// size prints bytes in GiB, or in MiB below one GiB.
func size(b uint64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// checkNodeDisk is nodeDiskShortfall on the disk that holds dir.
func checkNodeDisk(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("reading the free space of %s: %w", dir, err)
	}
	if why := nodeDiskShortfall(dir, st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize)); why != "" {
		return fmt.Errorf("%s", why)
	}
	return nil
}

// pressureEvents are the kubelet's event reasons for a node short of a resource (its eviction
// manager's and node status's).
var pressureEvents = map[string]bool{
	"EvictionThresholdMet":      true,
	"NodeHasDiskPressure":       true,
	"NodeHasInsufficientMemory": true,
	"NodeHasInsufficientPID":    true,
	"FreeDiskSpaceFailed":       true,
	"ImageGCFailed":             true,
}

// nodePressure names the node's pressure conditions that hold (DiskPressure, MemoryPressure,
// PIDPressure), with the kubelet's message: "" when none does. A node under pressure can be
// Ready and still admit no pod.
func nodePressure(nd *corev1.Node) string {
	var out string
	for _, c := range nd.Status.Conditions {
		switch c.Type {
		case corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure:
			if c.Status == corev1.ConditionTrue {
				if out != "" {
					out += "; "
				}
				out += fmt.Sprintf("%s (%s)", c.Type, c.Message)
			}
		}
	}
	return out
}
