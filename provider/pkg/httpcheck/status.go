// Package httpcheck holds HttpReady's pure decisions: which status codes count (expectedStatus),
// which paths stay below a Service's proxy path, and what of an answer or a URL a message may
// quote (credentials blanked, Secret-like bodies never shown). It makes no request.
package httpcheck

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseStatusSet parses "200", "200-399" or "200,204,300-302".
func ParseStatusSet(s string) (func(int) bool, error) {
	type span struct{ lo, hi int }
	var spans []span
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil || a < 100 || b > 599 || a > b {
			return nil, fmt.Errorf("%q is not a status code, range or list such as 200-399 or 200,204", s)
		}
		spans = append(spans, span{a, b})
	}
	return func(code int) bool {
		for _, sp := range spans {
			if code >= sp.lo && code <= sp.hi {
				return true
			}
		}
		return false
	}, nil
}
