//go:build tools

package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
	_ "github.com/cert-manager/cert-manager/cmd/controller"
	_ "github.com/cert-manager/cert-manager/cmd/ctl"
	_ "github.com/cert-manager/cert-manager/cmd/webhook"
)
