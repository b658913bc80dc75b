package options

import (
	"errors"
	"time"

	"github.com/spf13/pflag"
)

// durationFlag is pflag's duration flag with an error that shows the accepted form: pflag's
// own says only "time: invalid duration".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration: want a number with a unit, such as 300ms, 10s, 1m or 1h30m")
	}
	*f.d = d
	return nil
}

// durationVar registers a durationFlag on fs.
func durationVar(fs *pflag.FlagSet, d *time.Duration, name, usage string) {
	fs.Var(durationFlag{d}, name, usage)
}
