package notify

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// The document carries the keys and writer of a change as top-level fields, and leaves them
// out when nothing is known.
func TestChangeDocumentNamesKeysAndWriter(t *testing.T) {
	at := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	keys := whatchanged.Diff(map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "3", "c": "4"}, nil)
	c := Change{Kind: "Secret", Namespace: "ns", Name: "creds", Hash: "h", Time: at,
		Report: whatchanged.NewReport(keys, whatchanged.Writer{Manager: "external-secrets", Operation: "Update", Time: at}, true)}
	b, err := json.Marshal(c)
	testutil.Must(t, err)
	const want = `{"kind":"Secret","namespace":"ns","name":"creds","hash":"h","keysAdded":["c"],"keysRemoved":["b"],"keysChanged":["a"],"changedBy":{"manager":"external-secrets","operation":"Update","time":"2026-11-26T21:00:00Z","reportedBy":"managedFields"},"workloads":null,"time":"2026-11-26T21:00:00Z"}`
	if string(b) != want {
		t.Errorf("document\n%s\nwant\n%s", b, want)
	}
	b, _ = json.Marshal(Change{Kind: "ConfigMap", Time: at})
	if want := `{"kind":"ConfigMap","namespace":"","name":"","hash":"","workloads":null,"time":"2026-11-26T21:00:00Z"}`; string(b) != want {
		t.Errorf("document without a report\n%s\nwant\n%s", b, want)
	}
}
