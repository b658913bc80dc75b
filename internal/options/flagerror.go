package options

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// ExplainFlagError rewrites pflag's error for a value a flag can't take ("strconv.ParseBool:
// parsing \"yes\": invalid syntax") into one that names the flag and what it accepts. Other
// errors are returned as they are.
func ExplainFlagError(err error) error {
	var invalid *pflag.InvalidValueError
	if !errors.As(err, &invalid) {
		return err
	}
	f := invalid.GetFlag()
	want := ""
	switch f.Value.Type() {
	case "bool":
		want = "true or false"
	case "int":
		want = "a whole number"
	case "duration":
		want = "a duration such as 300ms, 10s, 1m or 1h30m"
	default:
		return err
	}
	return fmt.Errorf("--%s: %q is not %s", f.Name, invalid.GetValue(), want)
}
