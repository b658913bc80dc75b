package whatchanged

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Writer is who wrote a source last, as its managedFields tell: the field manager, the
// operation (Apply or Update), the subresource and the time of the newest entry. It is
// tenant-written input: bounded and reduced to safe characters, and only ever reported.
type Writer struct {
	Manager     string    `json:"manager"`
	Operation   string    `json:"operation,omitempty"`
	Subresource string    `json:"subresource,omitempty"`
	Time        time.Time `json:"time,omitzero"`
}

const (
	// MaxManager is the longest manager name kept: the API server's own limit for
	// fieldManager. Entries written directly into managedFields may be longer.
	MaxManager = 128
	// maxSubresource bounds a subresource name (the API's are short words).
	maxSubresource = 32
	// maxEntries bounds the managedFields entries read: the newest is found among these.
	maxEntries = 256
	// maxUnix bounds the times kept (year 36812): a time past it, or before 1970, is unknown.
	maxUnix = 1 << 40
)

// Newest returns the writer of the newest believable managedFields entry of a source observed
// at now (by time; among entries of the same second, the last listed, the API server's order
// of writing); ok is false when no entry has a manager. A time later than now plus Skew is
// not believed: the entry is kept without its time, behind every dated one. The fields sets
// are never read.
func Newest(entries []metav1.ManagedFieldsEntry, now time.Time) (w Writer, ok bool) {
	return newest(Entries(entries, now))
}

// writerOf is the writer an entry names, observed at now; ok is false for no manager.
func writerOf(e metav1.ManagedFieldsEntry, now time.Time) (Writer, bool) {
	m := clean(e.Manager, MaxManager)
	if m == "" {
		return Writer{}, false
	}
	w := Writer{Manager: m, Subresource: clean(e.Subresource, maxSubresource)}
	if e.Time != nil && e.Time.Unix() > 0 && e.Time.Unix() <= maxUnix && !e.Time.After(now.Add(Skew)) {
		w.Time = e.Time.UTC().Truncate(time.Second)
	}
	switch e.Operation {
	case metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate:
		w.Operation = string(e.Operation)
	}
	return w, true
}

// safe reports whether c is kept as it is in a manager or subresource name: the characters
// of the managers seen in practice ("kubectl-client-side-apply", "helm", "argocd-controller",
// "Go-http-client", "manager.v2"). Anything else (controls, spaces, markup, separators of
// Token) becomes '_', so that a name is safe in a terminal, an Event, chat markup, a log
// line, and in the cache's packed string.
func safe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '+'
}

// clean bounds s to max bytes and replaces every byte outside safe by '_'.
func clean(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if !safe(b[j]) {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return s
}

// tokenSep separates the parts of a Token; safe never lets it into a part.
const tokenSep = "|"

// Token is w in one word for the cache: "manager|operation|unix seconds|subresource", with no
// space, so that it sits among the cache's space-separated hashes; "" for no writer.
func (w Writer) Token() string {
	if w.Manager == "" {
		return ""
	}
	secs := ""
	if !w.Time.IsZero() {
		secs = strconv.FormatInt(w.Time.Unix(), 10)
	}
	return w.Manager + tokenSep + w.Operation + tokenSep + secs + tokenSep + w.Subresource
}

// ParseToken reads a Token back; ok is false for "" or a malformed token. The parts are
// cleaned again, so a token from anywhere yields a bounded, safe Writer.
func ParseToken(s string) (w Writer, ok bool) {
	parts := strings.Split(s, tokenSep)
	if len(parts) != 4 || parts[0] == "" {
		return Writer{}, false
	}
	w = Writer{Manager: clean(parts[0], MaxManager), Subresource: clean(parts[3], maxSubresource)}
	switch op := metav1.ManagedFieldsOperationType(parts[1]); op {
	case metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate:
		w.Operation = string(op)
	}
	if parts[2] != "" {
		secs, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || secs <= 0 || secs > maxUnix {
			return Writer{}, false
		}
		w.Time = time.Unix(secs, 0).UTC()
	}
	return w, true
}

// ReportedBy is how every description of a writer says where the name comes from: a field
// manager is what the client that wrote called itself, and managedFields can be written by
// hand; the API server only reports it.
const ReportedBy = "reported by the API server"

// String describes w for people, saying whose word it is: "field manager kubectl-edit (Update
// at 2026-11-26T21:00:00Z, reported by the API server)".
func (w Writer) String() string {
	if w.Manager == "" {
		return ""
	}
	d := w.details()
	if d != "" {
		d += ", "
	}
	return "field manager " + w.Manager + " (" + d + ReportedBy + ")"
}

// Short describes w in a list that says ReportedBy once: "kubectl-edit (Update at
// 2026-11-26T21:00:00Z)".
func (w Writer) Short() string {
	if w.Manager == "" {
		return ""
	}
	if d := w.details(); d != "" {
		return w.Manager + " (" + d + ")"
	}
	return w.Manager
}

// details are the operation, subresource and time: "Update of status at 2026-11-26T21:00:00Z".
func (w Writer) details() string {
	var parts []string
	switch {
	case w.Operation != "" && w.Subresource != "":
		parts = append(parts, w.Operation+" of "+w.Subresource)
	case w.Operation != "":
		parts = append(parts, w.Operation)
	}
	if !w.Time.IsZero() {
		parts = append(parts, "at "+w.Time.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " ")
}

// MarshalJSON writes w with "reportedBy": "managedFields", so that a document's reader knows
// the name is the writing client's own, as the API server recorded it.
func (w Writer) MarshalJSON() ([]byte, error) {
	type plain Writer
	return json.Marshal(struct {
		plain
		ReportedBy string `json:"reportedBy"`
	}{plain(w), "managedFields"})
}
