//go:build tools

package tools

import (
	_ "github.com/external-secrets/external-secrets"
)
