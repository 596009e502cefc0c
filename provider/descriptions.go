package provider

import "strings"

// markdown is a resource's description from its descriptions/<gate>.md file (embedded beside the
// resource's type), without the file's final newline: the schema's text is the file's one line.
func markdown(file string) string {
	return strings.TrimSuffix(file, "\n")
}
