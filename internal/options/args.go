package options

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// JoinBoolValues rewrites "--reload-on-create true" into "--reload-on-create=true" for the
// boolean flags of fs. Upstream takes some switches as string flags, so users write the
// value as a separate argument; pflag would read it as a positional argument instead, which
// reloader refuses. Only a boolean literal right after a boolean flag is joined.
func JoinBoolValues(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		out = append(out, arg)
		if arg == "--" {
			return append(out, args[i+1:]...)
		}
		name, ok := strings.CutPrefix(arg, "--")
		if !ok || strings.Contains(name, "=") || i+1 == len(args) {
			continue
		}
		f := fs.Lookup(name)
		switch {
		case f == nil:
		case f.NoOptDefVal == "":
			// A flag that needs a value takes the next argument as it is.
			out = append(out, args[i+1])
			i++
		case f.Value.Type() == "bool" && isBoolLiteral(args[i+1]):
			out[len(out)-1] = arg + "=" + args[i+1]
			i++
		}
	}
	return out
}

func isBoolLiteral(s string) bool {
	_, err := strconv.ParseBool(s)
	return err == nil
}
