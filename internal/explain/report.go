package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Workload is the explanation of one workload; `-o json` prints it as it is.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ReloaderConfigs name the ReloaderConfigs whose rules or settings apply to the workload.
	ReloaderConfigs []string `json:"reloaderConfigs,omitempty"`
	// Sources are the sources the decision looked at: those that reload the workload, and
	// those it references or names that do not, each with the reason.
	Sources []SourceDecision `json:"sources"`
	// Next is what the next reconcile does.
	Next Next `json:"next"`
	// Events are the newest reload Events about the workload, newest first.
	Events []Event `json:"events"`
	// Notes say what limits the explanation, or what is wrong with the workload's annotations.
	Notes []string `json:"notes,omitempty"`
}

// SourceDecision is one source, and whether and why it reloads the workload.
type SourceDecision struct {
	// Kind is ConfigMap, Secret or SecretProviderClass.
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Reloads bool   `json:"reloads"`
	// Reason is the decision's reason, as the controller's Events and logs word it.
	Reason     string `json:"reason"`
	Referenced bool   `json:"referenced"`
	Exists     bool   `json:"exists"`
	// Keys are the keys whose changes count, when the workload restricts the source to some.
	Keys []string `json:"keys,omitempty"`
	// Hash is the content hash now and Recorded the one recorded on the workload, for
	// sources that reload it; "unknown" when it can't be computed here.
	Hash     string `json:"hash,omitempty"`
	Recorded string `json:"recorded,omitempty"`
	// State compares them: see the State constants.
	State string `json:"state,omitempty"`
	// ChangedBy is who wrote the source last, from its managedFields: the newest entry's
	// field manager, operation and time. Which keys a change touched is known only to the
	// controller: its Reloaded Events name them.
	ChangedBy *whatchanged.Writer `json:"changedBy,omitempty"`
}

// The states of a source that reloads the workload.
const (
	StateUnchanged  = "unchanged"
	StateChanged    = "changed"
	StateCreated    = "created"
	StateDeleted    = "deleted"
	StateMissing    = "missing"
	StateUnrecorded = "not recorded yet"
	StateUnknown    = "unknown"
	// A record too large for an annotation is stored folded, as bucket sums: a source's own
	// hash is not in it, and the plan compares sums.
	StateFolded = "not changed (folded record)"
	// A creation or deletion that the flags leave alone: recorded, not reloaded.
	StateCreatedQuiet = "created (no reload: --reload-on-create is off)"
	StateDeletedQuiet = "deleted (no reload: --reload-on-delete is off)"
)

// Next is what the next reconcile of the workload does.
type Next struct {
	// Action is one of the Action constants.
	Action string `json:"action"`
	Why    string `json:"why"`
	// Sources are the sources it acts on ("configmap/name"), for reload, wait and skip.
	Sources []string `json:"sources,omitempty"`
	// Wait is how long the coalescing window still holds the reload back.
	Wait string `json:"wait,omitempty"`
	// PausedUntil is when the Deployment's pause period ends.
	PausedUntil *time.Time `json:"pausedUntil,omitempty"`
	// HeldBy is, for action held, what paces the reload (min-interval, reload-window,
	// rate-limit); HeldUntil is when it reloads.
	HeldBy    string     `json:"heldBy,omitempty"`
	HeldUntil *time.Time `json:"heldUntil,omitempty"`
	// Approval is, for a reload held for approval (heldBy approval), the digest of the content
	// it waits for: what `kubectl reloader approve` writes.
	Approval string `json:"approval,omitempty"`
}

// The actions of the next reconcile.
const (
	ActionReload  = "reload"
	ActionWait    = "wait"
	ActionHeld    = "held"
	ActionSkip    = "skip"
	ActionRecord  = "record"
	ActionNothing = "nothing"
	ActionIgnored = "ignored"
	ActionNotify  = "notify"
)

// Event is one reload Event about the workload.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
}

// Source is the explanation of a ConfigMap or Secret: the workloads its change concerns.
type Source struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Exists    bool   `json:"exists"`
	Hash      string `json:"hash,omitempty"`
	// Workloads are those a change of the source reloads, with why, and what their next
	// reconcile does.
	Workloads []AffectedWorkload `json:"workloads"`
	Notes     []string           `json:"notes,omitempty"`
}

// AffectedWorkload is one workload a change of a source concerns.
type AffectedWorkload struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Next   Next   `json:"next"`
}

// workload turns the controller's explanation of obj into the report.
func (e *Explainer) workload(kind workload.Kind, obj client.Object, ex controller.Explanation) *Workload {
	w := &Workload{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Sources: []SourceDecision{}, Events: []Event{}, Notes: slices.Clone(e.notes)}
	for _, err := range ex.Invalid {
		w.Notes = append(w.Notes, "ignored: "+err.Error())
	}
	if _, annotated := obj.GetAnnotations()[reload.RecordAnnotation]; !annotated && e.ledgerNote != "" {
		w.Notes = append(w.Notes, e.ledgerNote)
	}
	w.ReloaderConfigs = ex.Configs
	w.Notes = append(w.Notes, ex.Conflicts...)
	if ex.Restart != "" {
		w.Notes = append(w.Notes, "restart strategy: "+ex.Restart)
	}
	if ex.Eviction != "" {
		w.Notes = append(w.Notes, "evict restart under way: "+ex.Eviction)
	}
	listed := map[source.ID]bool{}
	for _, d := range ex.Weighed {
		// With a named entry, every source of the namespace is weighed: only the ones the
		// workload references or names are worth listing. A source named twice is weighed
		// twice, with the same answer.
		if (!d.Concerns && !d.Referenced && !d.Named) || listed[d.ID] {
			continue
		}
		listed[d.ID] = true
		s := SourceDecision{Kind: d.ID.Kind.Title(), Name: d.ID.Name, Reloads: d.Concerns,
			Reason: string(d.Reason), Referenced: d.Referenced, Exists: d.Exists}
		if d.Concerns {
			s.Keys = ex.Keys[d.ID]
			s.Hash, s.Recorded, s.State = e.compare(d.ID, ex)
			if d.ID.Kind == source.Secret && e.keyNote != "" && !slices.Contains(w.Notes, e.keyNote) {
				w.Notes = append(w.Notes, e.keyNote)
			}
		}
		if wr, ok := ex.Writers[d.ID]; ok {
			s.ChangedBy = &wr
		}
		w.Sources = append(w.Sources, s)
	}
	w.Sources = append(w.Sources, e.hiddenSecrets(ex)...)
	slices.SortStableFunc(w.Sources, func(a, b SourceDecision) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	w.Next = e.next(kind, obj, ex)
	unknown := 0
	for _, s := range w.Sources {
		if s.Kind == source.Secret.Title() && s.State == StateUnknown {
			w.Notes = append(w.Notes, e.unknownNote(s))
			unknown++
		}
	}
	if unknown > 0 {
		unknownNext(&w.Next)
		// The digest covers every changed source's hash: with a Secret's unknown, it is not
		// the one the controller waits for.
		w.Next.Approval = ""
	}
	return w
}

// unknownNext words the next reconcile so that it claims nothing about the Secrets whose
// change is unknown: the plan took them as unchanged.
func unknownNext(n *Next) {
	switch n.Action {
	case ActionIgnored, ActionRecord:
	case ActionNothing:
		n.Why = "none of the sources whose hash can be computed here changed since the last reload; whether a Secret did is unknown here (a change of one would reload it)"
	default:
		n.Why += "; Secrets are not counted: whether they changed is unknown here"
	}
}

// hiddenSecrets are, when Secrets may not be read here, the Secrets on the workload's record:
// reloader weighed them last time, and their recorded hashes are all that can be told.
func (e *Explainer) hiddenSecrets(ex controller.Explanation) []SourceDecision {
	if !e.secretsHidden {
		return nil
	}
	var out []SourceDecision
	for k, h := range ex.Record {
		id, ok := source.ParseID(k)
		if !ok || id.Kind != source.Secret {
			continue
		}
		out = append(out, SourceDecision{Kind: id.Kind.Title(), Name: id.Name, Reloads: true,
			Reason: "on reloader's record; Secrets are not readable here", Hash: unknown, Recorded: h, State: StateUnknown})
	}
	return out
}

// unknownNote says plainly what is known of a Secret whose change is unknown here.
func (e *Explainer) unknownNote(s SourceDecision) string {
	why := "its current hash can't be computed without reloader's hash key"
	if e.secretsHidden {
		why = "it can't be read here"
	}
	recorded := "no hash of it is recorded on the workload (new to it, or absent when last recorded)"
	if s.Recorded != "" {
		recorded = "its hash recorded on the workload is " + short(s.Recorded, true)
	}
	return fmt.Sprintf("secret/%s: %s, so whether it changed is unknown; %s", s.Name, why, recorded)
}

// compare tells a concerned source's hash now against the one on the workload's record.
func (e *Explainer) compare(id source.ID, ex controller.Explanation) (now, recorded, state string) {
	now = ex.Input.Sources[id].Hash
	recorded, inRecord := ex.Record[id.String()]
	rebased := ex.Input.Record[id.String()]
	if !inRecord && folded(ex.Record) {
		recorded = foldedRecord
	}
	switch {
	case e.unknownHash[id.Kind] && now != reload.Absent:
		now, state = unknown, StateUnknown
	case slices.Contains(ex.Changed, id) && now == reload.Absent:
		state = StateDeleted
	case slices.Contains(ex.Changed, id) && inRecord && recorded == reload.Absent:
		state = StateCreated
	case slices.Contains(ex.Changed, id):
		state = StateChanged
	case recorded == foldedRecord:
		state = StateFolded
	case now == reload.Absent && ex.HasRecord && inRecord && recorded != reload.Absent:
		state = StateDeletedQuiet
	case now == reload.Absent:
		state = StateMissing
	case !ex.HasRecord || !inRecord:
		state = StateUnrecorded
	case rebased == reload.Absent:
		state = StateCreatedQuiet
	default:
		// Equal, a Secret hash re-based to the current key, or a pooled source whose
		// versions are covered.
		state = StateUnchanged
	}
	if now == reload.Absent {
		now = ""
	}
	return now, recorded, state
}

// foldedRecord stands for the recorded hash of a source in a folded record.
const foldedRecord = "(folded)"

// folded reports whether a record holds bucket sums: keys that name no source.
func folded(r reload.Record) bool {
	for k := range r {
		if _, ok := source.ParseID(k); !ok {
			return true
		}
	}
	return false
}

// next says what the next reconcile does, and why.
func (e *Explainer) next(kind workload.Kind, obj client.Object, ex controller.Explanation) Next {
	if why := e.ignored(kind, obj.GetNamespace(), ex); why != "" {
		return Next{Action: ActionIgnored, Why: why}
	}
	p := ex.Plan
	n := Next{}
	if !ex.PausedUntil.IsZero() {
		t := ex.PausedUntil.UTC().Truncate(time.Second)
		n.PausedUntil = &t
	}
	switch {
	case p.Wait > 0:
		n.Action, n.Sources, n.Wait = ActionWait, ids(ex.Changed), p.Wait.Round(time.Millisecond).String()
		n.Why = fmt.Sprintf("sources changed moments ago; the coalescing window (%v: --coalesce-window, or a ReloaderConfig's coalesceWindow) holds the reload until they have been quiet, so that changes landing together roll once", ex.Window)
	case len(p.Skipped) > 0:
		n.Action, n.Sources = ActionSkip, changeIDs(p.Skipped)
		n.Why = "changed, but not reloading: " + p.Skip.Why + "; the new hashes are recorded"
	case p.Reloads() && e.conf.WebhookURL != "":
		n.Action, n.Sources = ActionNotify, changeIDs(p.Changes)
		n.Why = "changed since the last reload; with --webhook-url reloader POSTs the change instead of reloading"
	case len(ex.Notified) > 0:
		n.Action, n.Sources = ActionNotify, changeIDs(ex.Notified)
		n.Why = "changed since the last reload; mode notify (" + approval.ModeAnnotation + ", or --mode): reloader reports that it would reload (Event ReloadNotified, alert) and records the new hashes; nothing restarts"
	case p.Reloads() && ex.Hold.Reason == approval.HoldReason:
		n.Action, n.Sources, n.HeldBy = ActionHeld, changeIDs(p.Changes), ex.Hold.Reason
		n.Approval = approval.Digest(p.Changes)
		n.Why = "changed since the last reload; mode approve: " + ex.Hold.Why
	case p.Reloads() && ex.Hold.Reason != "":
		t := ex.Hold.Until.UTC().Truncate(time.Second)
		n.Action, n.Sources, n.HeldBy, n.HeldUntil = ActionHeld, changeIDs(p.Changes), ex.Hold.Reason, &t
		n.Why = fmt.Sprintf("changed since the last reload; held: %s, reloads at %s with the content of that time", ex.Hold.Why, t.Format(time.RFC3339))
	case p.Reloads():
		n.Action, n.Sources = ActionReload, changeIDs(p.Changes)
		n.Why = "changed since the last reload"
		switch {
		case ex.Pause.Pause:
			n.Why += fmt.Sprintf("; then pauses the Deployment until %s (%s), so that the changes of that period roll out once", n.PausedUntil.Format(time.RFC3339), e.conf.Keys.PausePeriod)
		case n.PausedUntil != nil:
			n.Why += "; the Deployment stays paused by reloader until " + n.PausedUntil.Format(time.RFC3339) + ", and the pods roll then"
		}
	case !ex.HasRecord && p.WriteRecord:
		n.Action = ActionRecord
		n.Why = "seen for the first time: records the current hashes on the workload and reloads nothing"
	case len(ex.Input.Sources) == 0:
		n.Action, n.Why = ActionNothing, "no source can reload this workload"
	default:
		n.Action, n.Why = ActionNothing, "no source that can reload it changed since the last reload"
	}
	if n.Action != ActionReload && n.PausedUntil != nil {
		n.Why += "; paused by reloader until " + n.PausedUntil.Format(time.RFC3339) + " (" + e.conf.Keys.PausePeriod + "), resumed then"
	}
	if ex.Pause.Resume {
		n.Why += "; resumes the Deployment: its pause period is over"
	}
	return n
}

// ignoredKind says why reloader leaves every workload of a kind alone, if it does.
func (e *Explainer) ignoredKind(kind workload.Kind) string {
	switch {
	case e.conf.IgnoresWorkload(kind.Name()):
		return fmt.Sprintf("--ignored-workload-types leaves %ss alone", kind.Name())
	case kind.Name() == "Rollout" && !e.conf.IsArgoRollouts:
		return "Rollouts are reloaded only with --is-Argo-Rollouts"
	}
	return ""
}

// ignored says why reloader leaves the workload alone whatever its sources do, if it does.
func (e *Explainer) ignored(kind workload.Kind, ns string, ex controller.Explanation) string {
	c := e.conf
	switch {
	case e.ignoredKind(kind) != "":
		return e.ignoredKind(kind)
	case len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, ns):
		return fmt.Sprintf("namespace %s is not in --namespaces (%s)", ns, strings.Join(c.Namespaces, ","))
	case slices.Contains(c.NamespacesToIgnore, ns):
		return fmt.Sprintf("namespace %s is in --namespaces-to-ignore", ns)
	case ex.NotSelected:
		return fmt.Sprintf("--namespace-selector %s does not select namespace %s", c.NamespaceSelector, ns)
	}
	return ""
}

func ids(in []source.ID) []string {
	out := make([]string, len(in))
	for i, id := range in {
		out[i] = id.String()
	}
	return out
}

func changeIDs(changes []reload.Change) []string {
	out := make([]string, len(changes))
	for i, ch := range changes {
		out[i] = ch.ID.String()
	}
	return out
}
