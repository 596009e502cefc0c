// Package registry holds ImageReady's pure decisions about an OCI registry: how an image
// reference and a platform are spelled, which dockerconfigjson entry applies to a repository (as
// the kubelet matches them), what a registry's error means (wait, or fail at once and say which
// input to set), which platforms an index holds, and when plain HTTP is allowed. It calls no
// registry and no cluster; the gate in the provider package makes the calls.
package registry
