package whatchanged

// Report is what a reload, an alert or a webhook document says of one source's change: the
// names of its keys (at most MaxNamed per list; KeysNotNamed counts the others) and its
// writer. Values are never part of it.
type Report struct {
	KeysAdded    []string `json:"keysAdded,omitempty"`
	KeysRemoved  []string `json:"keysRemoved,omitempty"`
	KeysChanged  []string `json:"keysChanged,omitempty"`
	KeysNotNamed int      `json:"keysNotNamed,omitempty"`
	ChangedBy    *Writer  `json:"changedBy,omitempty"`

	keys Keys
}

// NewReport reports keys and, when known, the writer.
func NewReport(k Keys, w Writer, known bool) Report {
	r := Report{KeysAdded: k.Added, KeysRemoved: k.Removed, KeysChanged: k.Changed,
		KeysNotNamed: k.NAdded + k.NRemoved + k.NChanged - len(k.Added) - len(k.Removed) - len(k.Changed), keys: k}
	if known {
		r.ChangedBy = &w
	}
	return r
}

// Text is the report for people, to follow a source's name: " (keys changed: A; added: B) by
// kubectl-edit (Update) at 2026-11-26T21:00:00Z"; "" when nothing is known.
func (r Report) Text() string {
	var s string
	if k := r.keys.String(); k != "" {
		s = " (" + k + ")"
	}
	if r.ChangedBy != nil {
		s += " by " + r.ChangedBy.String()
	}
	return s
}

// Manager is the writer's manager, "" when unknown.
func (r Report) Manager() string {
	if r.ChangedBy == nil {
		return ""
	}
	return r.ChangedBy.Manager
}

// Keys are the key names the report was made from.
func (r Report) Keys() Keys { return r.keys }
