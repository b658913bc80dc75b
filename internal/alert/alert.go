// Package alert tells a chat channel or any HTTP endpoint about each reload (upstream's
// ALERT_* settings). Alerts are queued and sent in the background: a slow or failing sink
// never delays or fails a reload.
package alert

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Reload is what an alert reports.
type Reload struct {
	Kind      string
	Namespace string
	Name      string
	Sources   []Source
	Time      time.Time
	// Held, when set, says why the reload is held instead (the flap breaker's quarantine):
	// the alert reports the hold, not a reload.
	Held string
	// Mode, when set, says that nothing was rolled: ModeNotify (reloader would reload) or
	// ModeApprove (the reload waits for approval; Held says of which content, since when).
	Mode string
	// HeldBy names what holds it, the raw sink's event ("waves-halted"); empty: "quarantine".
	HeldBy string
}

// Modes of an alert about a reload not rolled (internal/approval's names).
const (
	ModeNotify  = "notify"
	ModeApprove = "approve"
)

// Source is one changed source of a reload, with the names of the keys its change added,
// removed and changed, and who wrote it (never values).
type Source struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Hash    string `json:"hash"`
	Deleted bool   `json:"deleted,omitempty"`
	whatchanged.Report
}

// SourcesOf names the changed sources of a reload, as Events and alerts show them. what, when
// not nil, tells each change's keys and writer.
func SourcesOf(changes []reload.Change, what ...whatchanged.Report) []Source {
	out := make([]Source, len(changes))
	for i, ch := range changes {
		out[i] = Source{Kind: ch.ID.Kind.Title(), Name: ch.ID.Name, Hash: ch.Hash, Deleted: ch.Hash == reload.Absent}
		if i < len(what) {
			out[i].Report = what[i]
		}
	}
	return out
}

// Describe names changed sources for people, with what is known of their change:
// "ConfigMap app (keys changed: LOG_LEVEL) by kubectl-edit (Update) at ..., Secret creds (deleted)".
func Describe(sources []Source) string {
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = s.Kind + " " + s.Name
		if s.Deleted {
			parts[i] += " (deleted)"
		}
		parts[i] += s.Report.Text()
	}
	return strings.Join(parts, ", ")
}

// Text is the one-line human description every chat sink shows.
func (r Reload) Text(additional string) string {
	text := fmt.Sprintf("Reloader reloaded %s %s/%s after a change of %s", r.Kind, r.Namespace, r.Name, Describe(r.Sources))
	switch {
	case r.Mode == ModeNotify:
		text = fmt.Sprintf("Reloader would reload %s %s/%s after a change of %s (mode notify: nothing restarted)", r.Kind, r.Namespace, r.Name, Describe(r.Sources))
	case r.Mode == ModeApprove:
		text = fmt.Sprintf("Reloader waits for approval to reload %s %s/%s after a change of %s: %s", r.Kind, r.Namespace, r.Name, Describe(r.Sources), r.Held)
	case r.Held != "":
		text = fmt.Sprintf("Reloader holds reloads of %s %s/%s after changes of %s: %s", r.Kind, r.Namespace, r.Name, Describe(r.Sources), r.Held)
	}
	if additional != "" {
		text += "\n" + additional
	}
	return text
}

// Body renders r in the message format of sink: slack, teams, gchat or raw. The text holds
// what tenants write (object and key names, field managers, workload status messages in a
// waves hold): each chat sink gets it escaped for its own markup (escape.go), so that none of
// it becomes a link, a mention or formatting; raw carries it as JSON strings.
func Body(sink string, r Reload, additional string) ([]byte, error) {
	text := r.Text(additional)
	switch sink {
	case "slack":
		// The text, escaped, is the notification's fallback (mrkdwn off); the blocks, plain
		// text, show it and each change's keys and writer.
		return json.Marshal(map[string]any{"text": slackEscape(text), "mrkdwn": false, "blocks": slackBlocks(r, text)})
	case "gchat":
		// A card: its text is HTML, in which escaped text stays literal (a plain {"text": ...}
		// message has no escape for Chat's *bold*, <url|link> or <users/all>).
		return json.Marshal(gchatCard(r, additional))
	case "teams":
		// A Workflows ("When a Teams webhook request is received") message with one Adaptive
		// Card: the text, then each change's keys and writer as facts, markdown escaped.
		card := map[string]any{
			"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
			"type":    "AdaptiveCard",
			"version": "1.4",
			"body":    append([]map[string]any{{"type": "TextBlock", "text": chatText(r, additional, markdownEscape), "wrap": true}}, teamsFacts(r)...),
		}
		return json.Marshal(map[string]any{
			"type": "message",
			"attachments": []map[string]any{{
				"contentType": "application/vnd.microsoft.card.adaptive",
				"content":     card,
			}},
		})
	case "raw":
		event := "reload"
		switch {
		case r.Mode == ModeNotify:
			event = "would-reload"
		case r.Mode == ModeApprove:
			event = "approval-pending"
		case r.Held != "":
			event = cmp.Or(r.HeldBy, "quarantine")
		}
		return json.Marshal(rawAlert{
			Event:          event,
			Workload:       notify.Workload{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name},
			Sources:        r.Sources,
			Message:        text,
			AdditionalInfo: additional,
			Time:           r.Time.UTC(),
		})
	}
	return nil, fmt.Errorf("unknown alert sink %q", sink)
}

type rawAlert struct {
	Event          string          `json:"event"`
	Workload       notify.Workload `json:"workload"`
	Sources        []Source        `json:"sources"`
	Message        string          `json:"message"`
	AdditionalInfo string          `json:"additionalInfo,omitempty"`
	Time           time.Time       `json:"time"`
}

// Alerter queues alerts and sends them one at a time. Its zero value is not usable; nil is
// (it drops everything), so callers need not check whether alerts are on.
type Alerter struct {
	Sink           string
	URL            string
	AdditionalInfo string
	Poster         *notify.Poster
	Log            logr.Logger
	// Delivered is called after each attempt to deliver, for metrics.
	Delivered func(sink string, success bool)
	// Dropped, when set, is called for each alert dropped from the queue, with its namespace
	// (queue.go), for metrics.
	Dropped func(namespace string)

	queue *queue
}

// New returns an Alerter; run it with Start.
func New(sink, url, additional string, poster *notify.Poster, log logr.Logger) *Alerter {
	return &Alerter{Sink: sink, URL: url, AdditionalInfo: additional, Poster: poster, Log: log, queue: newQueue(QueueSize, NamespaceShare)}
}

// Queue hands r to the sender without waiting. A full queue drops an alert of the namespace
// that holds the most (queue.go), counted as not delivered.
func (a *Alerter) Queue(r Reload) {
	if a == nil {
		return
	}
	if out, dropped := a.queue.push(r); dropped {
		a.queue.drop(a.Log, out)
		if a.Dropped != nil {
			a.Dropped(out.Namespace)
		}
		a.delivered(false)
	}
}

// Start sends queued alerts, each namespace in turn, until ctx ends. It implements
// manager.Runnable.
func (a *Alerter) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.queue.ready:
		}
		for {
			r, ok := a.queue.pop()
			if !ok || ctx.Err() != nil {
				break
			}
			a.send(ctx, r)
		}
	}
}

// NeedLeaderElection is false: only the leader reloads, so only it queues alerts.
func (a *Alerter) NeedLeaderElection() bool { return false }

func (a *Alerter) send(ctx context.Context, r Reload) {
	body, err := Body(a.Sink, r, a.AdditionalInfo)
	if err == nil {
		err = a.Poster.Post(ctx, a.URL, body)
	}
	if err != nil {
		a.Log.Error(err, "alert not delivered", "sink", a.Sink, "workload", r.Kind+" "+r.Namespace+"/"+r.Name)
	}
	a.delivered(err == nil)
}

func (a *Alerter) delivered(ok bool) {
	if a.Delivered != nil {
		a.Delivered(a.Sink, ok)
	}
}
