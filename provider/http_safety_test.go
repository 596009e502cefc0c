package provider

import "testing"

func TestExcerptRedacts(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"login failed: password=hunter2 user=bob", `: "login failed: password=[redacted] user=bob"`},
		{`{"error":"bad","token":"abc123xyz"}`, `: "{\"error\":\"bad\",\"token\":\"[redacted]\"}"`},
		{"Authorization: Bearer eyJhbGciOi", `: "Authorization: Bearer [redacted]"`},
		{"see http://bob:pw1234@db.local/x", `: "see http://[redacted]@db.local/x"`},
		{`{"apiVersion":"v1","kind":"Secret","data":{"p":"aHVudGVy"}}`, " (the body is not shown: it looks like it holds secret data)"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE", " (the body is not shown: it looks like it holds secret data)"},
		{`{"data":{"status":"down"}}`, `: "{\"data\":{\"status\":\"down\"}}"`},
		{"no endpoints available for service \"web\"", `: "no endpoints available for service \"web\""`},
	} {
		if got := excerpt([]byte(tc.body)); got != tc.want {
			t.Errorf("excerpt(%q) = %s, want %s", tc.body, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"http://alice:pw@h:8080/p?token=t&x=1#frag", "http://REDACTED@h:8080/p?token=REDACTED&x=REDACTED"},
		{"https://h/healthz", "https://h/healthz"},
		{"http://alice@h/", "http://REDACTED@h/"},
	} {
		if got := redactURLString(tc.in); got != tc.want {
			t.Errorf("redactURLString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
