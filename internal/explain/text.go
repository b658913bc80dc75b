package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reloader-operator/reloader/internal/termsafe"
)

// WriteText prints a workload's explanation for people.
func (w *Workload) WriteText(out io.Writer) error {
	p := &printer{w: out}
	p.linef("%s %s/%s", w.Kind, w.Namespace, w.Name)
	if len(w.ReloaderConfigs) > 0 {
		p.linef("ReloaderConfigs: %s", strings.Join(w.ReloaderConfigs, ", "))
	}
	p.linef("")
	if len(w.Sources) == 0 {
		p.linef("No source is referenced or named by this workload.")
	} else {
		t := p.table()
		fmt.Fprintln(t, "SOURCE\tRELOADS\tHASH NOW\tRECORDED\tSTATE\tWHY")
		for _, s := range w.Sources {
			why := s.Reason
			if len(s.Keys) > 0 {
				why += "; only keys " + strings.Join(s.Keys, ", ")
			}
			if s.ChangedBy != nil {
				why += "; last written by " + s.ChangedBy.String()
			}
			p.row(t, sourceID(s.Kind, s.Name), yesNo(s.Reloads), short(s.Hash, s.Reloads), short(s.Recorded, s.Reloads), dash(s.State), why)
		}
		p.flush(t)
	}
	p.linef("")
	p.next("Next reconcile: ", w.Next)
	p.linef("")
	if len(w.Events) == 0 {
		p.linef("Last reloads: none in the Events kept by the cluster.")
	} else {
		p.linef("Last reloads (newest first):")
		t := p.table()
		for _, e := range w.Events {
			count := ""
			if e.Count > 1 {
				count = fmt.Sprintf(" (x%d)", e.Count)
			}
			p.row(t, "  "+e.Time.Format(time.RFC3339), e.Type, e.Reason, e.Message+count)
		}
		p.flush(t)
	}
	p.notes(w.Notes)
	return p.err
}

// WriteText prints a source's explanation for people.
func (s *Source) WriteText(out io.Writer) error {
	p := &printer{w: out}
	head := fmt.Sprintf("%s %s/%s", s.Kind, s.Namespace, s.Name)
	switch {
	case !s.Exists:
		head += " (does not exist)"
	case s.Hash != "":
		head += " (hash " + short(s.Hash, true) + ")"
	}
	p.linef("%s", head)
	p.linef("")
	if len(s.Workloads) == 0 {
		p.linef("A change reloads no workload.")
	} else {
		p.linef("A change reloads:")
		t := p.table()
		fmt.Fprintln(t, "  WORKLOAD\tWHY\tNEXT RECONCILE")
		for _, w := range s.Workloads {
			p.row(t, "  "+w.Kind+"/"+w.Name, w.Reason, w.Next.Action)
		}
		p.flush(t)
	}
	p.notes(s.Notes)
	return p.err
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

// linef prints a line of format, a constant of the code, with args sanitized: strings from
// the cluster reach the terminal only through linef and row.
func (p *printer) linef(format string, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = termsafe.Sanitize(s)
		}
	}
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

// row prints a table row of sanitized cells.
func (p *printer) row(t *tabwriter.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = termsafe.Sanitize(c)
	}
	if p.err == nil {
		_, p.err = fmt.Fprintln(t, strings.Join(cells, "\t"))
	}
}

func (p *printer) table() *tabwriter.Writer { return tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0) }

func (p *printer) flush(t *tabwriter.Writer) {
	if err := t.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) next(label string, n Next) {
	line := label + n.Action
	if len(n.Sources) > 0 {
		line += " " + strings.Join(n.Sources, ", ")
	}
	if n.Wait != "" {
		line += " in " + n.Wait
	}
	switch {
	case n.HeldUntil != nil:
		line += " until " + n.HeldUntil.Format(time.RFC3339) + " (" + n.HeldBy + ")"
	case n.Approval != "":
		line += " until approved (" + n.HeldBy + " of " + n.Approval + ")"
	}
	p.linef("%s", line)
	p.linef("  %s", n.Why)
}

func (p *printer) notes(notes []string) {
	if len(notes) == 0 {
		return
	}
	p.linef("")
	p.linef("Notes:")
	for _, n := range notes {
		p.linef("  %s", n)
	}
}

// sourceID names a source as the record and the plan do: "configmap/name".
func sourceID(kind, name string) string { return strings.ToLower(kind) + "/" + name }

// short abbreviates a hash for the table: the key ID of a keyed hash and the start of the
// final digest (a subset hash starts with its key set, the same before and after a change).
// Sources that reload nothing have no hash worth showing.
func short(h string, shown bool) string {
	switch {
	case !shown:
		return "-"
	case h == "":
		return "(none)"
	case h == unknown || h == foldedRecord:
		return h
	}
	id, digest, keyed := strings.Cut(h, ":")
	if !keyed {
		digest = h
	}
	if i := strings.LastIndexByte(digest, '.'); i >= 0 {
		digest = digest[i+1:]
	}
	if keyed {
		return id + ":" + digest[:min(len(digest), 8)]
	}
	return digest[:min(len(digest), 12)]
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
