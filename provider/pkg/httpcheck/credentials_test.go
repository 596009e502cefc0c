package httpcheck

import "testing"

// A URL is kept secret in the state when it may carry a credential; a plain one stays plain so
// that a diff and `pulumi stack export` still show it.
func TestURLCarriesCredentials(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		// Carry one.
		{"http://admin:PASSWORD@host/", true},
		{"http://admin@host/", true},     // a user name alone: often a token (`https://TOKEN@host`)
		{"http://:PASSWORD@host/", true}, // an empty user name, a password
		{"https://host/health?token=abc", true},
		{"https://host/health?abc123", true},  // a bare key: the token itself
		{"https://host/health?ready=1", true}, // any query value could be one: no guessing by name
		{"https://host/health?", true},        // an empty query: nothing to hide, but nothing plain either
		{"https://host/cb#access_token=abc", true},
		{"http://[::1:bad", true}, // does not parse: the worst case
		// Near misses: look like credentials, are not.
		{"https://host/healthz", false},
		{"https://host:8443/api/v1/health", false},
		{"http://127.0.0.1:8080/", false},
		{"https://token.example.com/password/reset", false}, // words in host and path, no user part or query
		{"https://host/a@b", false},                         // an @ in the path is not a user part
		{"http://[::1]:80/", false},
	} {
		if got := URLCarriesCredentials(tc.url); got != tc.want {
			t.Errorf("URLCarriesCredentials(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
