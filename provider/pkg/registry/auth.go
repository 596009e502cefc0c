package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// Auth finds repo's registry in a kubernetes.io/dockerconfigjson Secret, matching `auths` keys
// as the kubelet does: a key may carry a scheme, a port, a path prefix of the repository and `*`
// wildcards per DNS label; the longest matching path wins. Written here because docker/cli's
// config loader runs credential helpers named by the file (a Secret must not make the provider
// execute anything) and the kubelet's matcher lives in k8s.io/kubernetes. Errors never quote the
// Secret's contents.
func Auth(s *corev1.Secret, repo name.Repository) (authn.AuthConfig, error) {
	if s.Type != corev1.SecretTypeDockerConfigJson {
		return authn.AuthConfig{}, fmt.Errorf("has type %q, want %q (an imagePullSecret, as `kubectl create secret docker-registry` makes)",
			s.Type, corev1.SecretTypeDockerConfigJson)
	}
	raw, ok := s.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return authn.AuthConfig{}, fmt.Errorf("has no %s key", corev1.DockerConfigJsonKey)
	}
	var file struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if json.Unmarshal(raw, &file) != nil { // the decoder's error quotes the data: not shown
		return authn.AuthConfig{}, fmt.Errorf("its %s is not a JSON object with an \"auths\" map", corev1.DockerConfigJsonKey)
	}
	best, bestLen := "", -1
	for key := range file.Auths {
		if n, ok := authKeyMatches(key, repo); ok && (n > bestLen || (n == bestLen && key < best)) {
			best, bestLen = key, n
		}
	}
	if bestLen < 0 {
		return authn.AuthConfig{}, fmt.Errorf("has no credentials for registry %s (its %s lists %d other registr%s)",
			repo.RegistryStr(), corev1.DockerConfigJsonKey, len(file.Auths), map[bool]string{true: "y", false: "ies"}[len(file.Auths) == 1])
	}
	a := file.Auths[best]
	cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
	if a.Auth != "" {
		dec, err := base64.StdEncoding.DecodeString(a.Auth)
		user, pass, ok := strings.Cut(string(dec), ":")
		if err != nil || !ok {
			return authn.AuthConfig{}, fmt.Errorf("its entry for registry %s has an \"auth\" that is not base64 of user:password", repo.RegistryStr())
		}
		cfg.Username, cfg.Password = user, pass
	}
	if cfg == (authn.AuthConfig{}) {
		return authn.AuthConfig{}, fmt.Errorf("its entry for registry %s has no username, password, auth or token", repo.RegistryStr())
	}
	return cfg, nil
}

// dockerHubHosts are the names Docker Hub goes by in config files.
var dockerHubHosts = map[string]bool{"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true}

// authKeyMatches reports whether a dockerconfigjson key applies to repo, and how long its path
// prefix is (longer is more specific).
func authKeyMatches(key string, repo name.Repository) (int, bool) {
	k := strings.ToLower(key)
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	host, keyPath, _ := strings.Cut(k, "/")
	keyPath = strings.Trim(keyPath, "/")
	if keyPath == "v1" || keyPath == "v2" { // "https://index.docker.io/v1/": the API version, not a repository path
		keyPath = ""
	}
	reg := strings.ToLower(repo.RegistryStr())
	if dockerHubHosts[reg] && dockerHubHosts[host] {
		host = reg
	}
	if !hostMatches(host, reg) {
		return 0, false
	}
	if keyPath != "" {
		r := repo.RepositoryStr()
		if r != keyPath && !strings.HasPrefix(r, keyPath+"/") {
			return 0, false
		}
	}
	return len(keyPath), true
}

// hostMatches compares host[:port] patterns label by label, `*` matching one label (kubelet).
func hostMatches(pattern, host string) bool {
	ph, pp, _ := strings.Cut(pattern, ":")
	hh, hp, _ := strings.Cut(host, ":")
	if pp != hp {
		return false
	}
	pl, hl := strings.Split(ph, "."), strings.Split(hh, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := path.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}
