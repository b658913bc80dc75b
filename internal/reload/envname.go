package reload

import (
	"strings"

	"github.com/reloader-operator/reloader/internal/source"
)

// EnvVarPrefix starts every env var the env-vars strategy writes.
const EnvVarPrefix = "STAKATER_"

// EnvVarName is upstream Reloader's env var name for a source: STAKATER_<NAME>_<KIND>, where
// NAME is the source name upper-cased with each run of other characters than A-Z and 0-9
// turned into one underscore.
func EnvVarName(id source.ID) string {
	var b strings.Builder
	b.WriteString(EnvVarPrefix)
	underscore := false
	for _, r := range strings.ToUpper(id.Name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			underscore = false
			continue
		}
		if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	b.WriteByte('_')
	b.WriteString(id.Kind.EnvSuffix())
	return b.String()
}
