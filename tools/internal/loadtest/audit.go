package loadtest

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/audit"
)

// AuditPolicy logs every request of the users under test at Metadata level, once, when it
// completes; nothing of anyone else.
func AuditPolicy(users ...string) string {
	b, _ := json.Marshal(users)
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: ` + string(b) + `
- level: None
`
}

// API is a side's request count, from the audit log.
type API struct {
	// Source is "" for the audit log, "client metrics" for the controller's own count (HTTP
	// methods as verbs: no separate LISTs).
	Source    string         `json:"source,omitempty"`
	Total     int            `json:"total"`
	ByVerb    map[string]int `json:"byVerb"`
	ByCode    map[string]int `json:"byCode"`
	Conflicts int            `json:"conflicts"`
	// Lists counts LIST requests; WatchLists the watches that send the initial state first
	// (sendInitialEvents=true: client-go's informers list that way since 0.35), a LIST by
	// another name. ListEquivalents is the two together, what the LIST gate judges.
	Lists      int `json:"lists"`
	WatchLists int `json:"watchLists"`
	Writes     int `json:"writes"`
}

// ListEquivalents is the requests that bring a whole collection: LISTs and watch lists.
func (a API) ListEquivalents() int { return a.Lists + a.WatchLists }

// isWatchList reports whether a request URI is a watch that sends the collection's state
// first (a watch list).
func isWatchList(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	q := u.Query()
	return q.Get("sendInitialEvents") == "true" && (q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(u.Path, "/watch/"))
}

// CountAPI counts the requests of an audit log by verb and response code.
func CountAPI(events []audit.Event) API {
	a := API{ByVerb: map[string]int{}, ByCode: map[string]int{}}
	for _, e := range events {
		a.Total++
		a.ByVerb[e.Verb]++
		a.ByCode[strconv.Itoa(e.ResponseStatus.Code)]++
		switch e.Verb {
		case "list":
			a.Lists++
		case "watch":
			if isWatchList(e.RequestURI) {
				a.WatchLists++
			}
		case "create", "update", "patch", "delete":
			a.Writes++
		}
		if e.ResponseStatus.Code == 409 {
			a.Conflicts++
		}
	}
	return a
}

// rate is the requests per second, watches left out, received in [from, to).
func rate(events []audit.Event, from, to time.Time) float64 {
	n := 0
	for _, e := range events {
		if e.Verb != "watch" && !e.Received.Before(from) && e.Received.Before(to) {
			n++
		}
	}
	if s := to.Sub(from).Seconds(); s > 0 {
		return float64(n) / s
	}
	return 0
}

// repeatRate is the requests per second, watches left out, received in [from, to) on an
// object or collection asked for more than once in the window. A hot loop asks for the same
// thing again and again; work finished late but once, such as an Event for each rollout that
// completes, does not repeat, and does not count.
func repeatRate(events []audit.Event, from, to time.Time) float64 {
	type key struct{ verb, resource, subresource, namespace, name string }
	seen := map[key]int{}
	for _, e := range events {
		if e.Verb != "watch" && !e.Received.Before(from) && e.Received.Before(to) {
			o := e.ObjectRef
			seen[key{e.Verb, o.Resource, o.Subresource, o.Namespace, o.Name}]++
		}
	}
	n := 0
	for _, c := range seen {
		if c > 1 {
			n += c
		}
	}
	if s := to.Sub(from).Seconds(); s > 0 {
		return float64(n) / s
	}
	return 0
}

// splitAt parts events into those received before t and the rest.
func splitAt(events []audit.Event, t time.Time) (before, after []audit.Event) {
	for _, e := range events {
		if e.Received.Before(t) {
			before = append(before, e)
		} else {
			after = append(after, e)
		}
	}
	return before, after
}
