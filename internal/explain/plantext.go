package explain

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText prints a plan for people: the proposed sources, then the workloads, those that
// would roll first, then the count.
func (pl *Plan) WriteText(out io.Writer) error {
	p := &printer{w: out}
	p.linef("Plan for namespace %s", pl.Namespace)
	for _, s := range pl.Sources {
		line := "  " + s.Kind + " " + s.Name + ": " + s.Change
		if len(s.ChangedKeys) > 0 {
			line += " (keys " + strings.Join(s.ChangedKeys, ", ") + ")"
		}
		p.linef("%s", line)
	}
	p.linef("")
	if len(pl.Workloads) == 0 {
		p.linef("No workload uses or names these sources.")
	} else {
		t := p.table()
		fmt.Fprintln(t, "WORKLOAD\tROLLS\tPODS\tWHEN\tWHY")
		for _, w := range pl.Workloads {
			p.row(t, strings.ToLower(w.Kind)+"/"+w.Name, yesNo(w.Rolls), fmt.Sprint(w.Pods), pl.when(w), w.Reason)
		}
		p.flush(t)
	}
	p.linef("")
	s := pl.Summary
	switch s.Workloads {
	case 0:
		p.linef("Nothing would roll.")
	default:
		p.linef("%s would roll, %s, in %s; %s.", plural(s.Workloads, "workload"), plural(int(s.Pods), "pod"),
			plural(s.Namespaces, "namespace"), pl.span())
	}
	p.notes(pl.Notes)
	return p.err
}

// when says when a workload's pods start rolling, or, when they don't, what happens instead.
func (pl *Plan) when(w PlannedWorkload) string {
	if !w.Rolls {
		return w.Action
	}
	d := w.At.Sub(pl.Now)
	s := "now"
	if d > 0 {
		s = "in " + roundDuration(d)
	}
	if w.HeldBy != "" {
		s += " (" + w.HeldBy + ", " + w.At.Format(time.RFC3339) + ")"
	}
	return s
}

func (pl *Plan) span() string {
	s := pl.Summary
	if s.Last == nil || !s.Last.After(pl.Now) {
		return "all now"
	}
	return "the last in " + roundDuration(s.Last.Sub(pl.Now)) + ", at " + s.Last.Format(time.RFC3339)
}

// roundDuration keeps durations readable: milliseconds under a minute, seconds above.
func roundDuration(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
