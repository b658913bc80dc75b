// Package audit reads kube-apiserver audit logs (audit.k8s.io/v1 Events, one JSON document a
// line), so that tests and the load-test tool judge a process by what the API server saw it
// do, not by what it reports of itself.
package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Event is the part of an audit Event that reloader's tests read.
type Event struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// Read returns the events of user in the log at path; lines that are no Event are skipped.
func Read(path, user string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.User.Username == user {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// Request names the request for a person fixing RBAC: verb group/resource[/sub] and where.
func (e Event) Request() string {
	r := e.ObjectRef.Resource
	if e.ObjectRef.APIGroup != "" {
		r = e.ObjectRef.APIGroup + "/" + r
	}
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	where := "cluster-wide"
	if e.ObjectRef.Namespace != "" {
		where = "namespace " + e.ObjectRef.Namespace
	}
	if e.ObjectRef.Name != "" {
		where += " name " + e.ObjectRef.Name
	}
	return fmt.Sprintf("%s %s (%s)", e.Verb, r, where)
}
