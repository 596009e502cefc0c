package serviceproxy

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestURLStaysBelowTheService: whatever path a gate is given (HttpReady's service.path, a
// webhook's clientConfig.service.path for a direct call), the URL it requests lies below that
// Service's proxy path.
func TestURLStaysBelowTheService(t *testing.T) {
	// Building a URL calls no server.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	rc := cs.CoreV1().RESTClient().(*rest.RESTClient)
	// The REST client cleans a suffix that starts with / on its own ("/../x" is "/x"), but one
	// that does not is cleaned with the whole path, and climbs out.
	for path, ok := range map[string]bool{
		"": true, "/": true, "/healthz": true, "/a/b/..c": true, "/validate-x": true, "/../../secrets/db": true,
		"../x": false, "../../../secrets/db": false, "a/../../../../secrets/db": false,
	} {
		u, err := URLBelow(rc, "ns", "https:web:443", path)
		if (err == nil) != ok {
			t.Errorf("URLBelow(%q) = %v, %v; want allowed=%v", path, u, err, ok)
		}
		if err == nil && !strings.HasPrefix(u.Path, "/api/v1/namespaces/ns/services/https:web:443/proxy") {
			t.Errorf("URLBelow(%q) = %s, outside the Service's proxy path", path, u.Path)
		}
	}
}

func TestAPIServerAnswer(t *testing.T) {
	status := func(code int, reason metav1.StatusReason, msg string) string {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`,
			msg, reason, code)
	}
	cases := map[string]struct {
		body string
		ours bool
	}{
		"missing Service":       {status(404, metav1.StatusReasonNotFound, `services "web" not found`), true},
		"no endpoints":          {status(503, metav1.StatusReasonServiceUnavailable, `no endpoints available for service "web"`), true},
		"dial error":            {status(503, metav1.StatusReasonServiceUnavailable, `error trying to reach service: dial tcp 10.0.0.9:80: connect: connection refused`), true},
		"forbidden":             {status(403, metav1.StatusReasonForbidden, `services "web" is forbidden: User "u" cannot get resource "services/proxy"`), true},
		"backend text":          {"no endpoints available for service", false},
		"backend JSON":          {`{"status":"ok"}`, false},
		"backend HTML":          {"<html>503</html>", false},
		"empty":                 {"", false},
		"a Status of success":   {`{"kind":"Status","apiVersion":"v1","status":"Success","code":200}`, false},
		"another kind":          {`{"kind":"Pod","apiVersion":"v1","status":"Failure"}`, false},
		"Status of another API": {`{"kind":"Status","apiVersion":"example.com/v1","status":"Failure"}`, false},
	}
	for name, c := range cases {
		if _, ours := APIServerAnswer([]byte(c.body)); ours != c.ours {
			t.Errorf("%s: APIServerAnswer = %v, want %v", name, ours, c.ours)
		}
	}
}
