package httpcheck

import (
	"strings"
	"testing"
)

func TestParseStatusSet(t *testing.T) {
	for in, tc := range map[string]struct {
		in, out []int // codes that must and must not count
	}{
		"200":             {[]int{200}, []int{199, 201, 204}},
		"200-399":         {[]int{200, 302, 399}, []int{199, 400, 500}},
		"200,204,300-302": {[]int{200, 204, 300, 301, 302}, []int{201, 303}},
		" 200 , 204 ":     {[]int{200, 204}, []int{202}},
		"100-599":         {[]int{100, 599}, []int{99, 600}},
	} {
		accept, err := ParseStatusSet(in)
		if err != nil {
			t.Errorf("ParseStatusSet(%q): %v", in, err)
			continue
		}
		for _, c := range tc.in {
			if !accept(c) {
				t.Errorf("%q refuses %d", in, c)
			}
		}
		for _, c := range tc.out {
			if accept(c) {
				t.Errorf("%q accepts %d", in, c)
			}
		}
	}
	// Near misses: refused at Check, never read as something looser.
	for _, in := range []string{"", "2xx", "99", "600", "200-", "-200", "399-200", "200,,204", "200;204", "200-300-400", "0x1F4"} {
		if _, err := ParseStatusSet(in); err == nil || !strings.Contains(err.Error(), "is not a status code, range or list") {
			t.Errorf("ParseStatusSet(%q) = %v, want refused", in, err)
		}
	}
}

func TestProxyPathProblem(t *testing.T) {
	for path, ok := range map[string]bool{
		"":                true,
		"/":               true,
		"/healthz":        true,
		"/api/v1/ready":   true,
		"/a..b/c.d":       true, // dots inside a segment are a name, not a climb
		"healthz":         false,
		"/../secrets":     false,
		"/a/./b":          false,
		"/a/..":           false,
		"/%2e%2e/secrets": false,
		"/a%2fb":          false,
		`/a\..\b`:         false,
		"/x?token=1":      false,
		"/x#frag":         false,
		"/x\ny":           false,
		"/x\x7f":          false,
	} {
		if msg := ProxyPathProblem(path); (msg == "") != ok {
			t.Errorf("ProxyPathProblem(%q) = %q, want allowed=%v", path, msg, ok)
		}
	}
}
