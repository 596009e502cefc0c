package httpcheck

import (
	"fmt"
	"strings"
)

// ProxyPathProblem says why path could reach anything but the Service's own proxy path, or "".
// Percent-encoding is refused outright: `%2e%2e` and `%2f` are how a `..` or a `/` hides from a check
// that a later decoding undoes.
func ProxyPathProblem(path string) string {
	switch {
	case path == "":
		return ""
	case !strings.HasPrefix(path, "/"):
		return fmt.Sprintf("%q must start with /", path)
	case strings.ContainsAny(path, `%\?#`):
		return fmt.Sprintf("%q may not contain %%, \\, ? or #: the path is sent to the Service as given, below its proxy path, "+
			"and encoded or special characters could make it leave that path", path)
	case strings.IndexFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "the path may not contain control characters"
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("%q may not contain . or .. segments: the gate may only reach the Service's own proxy path", path)
		}
	}
	return ""
}
