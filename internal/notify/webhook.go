package notify

import (
	"context"
	"encoding/json"
	"time"

	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Change is the document --webhook-url receives when a source changes: what changed, and the
// workloads that reloader would have reloaded.
type Change struct {
	// Kind is ConfigMap, Secret or SecretProviderClass.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Hash is the new content hash, as reloader would write it; empty when Deleted.
	Hash    string `json:"hash"`
	Created bool   `json:"created,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	// Report names the keys the change added, removed and changed, and who wrote it; never
	// values.
	whatchanged.Report
	// Workloads would be reloaded by the change.
	Workloads []Workload `json:"workloads"`
	Time      time.Time  `json:"time"`
}

// Workload names one workload.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Webhook sends Changes to one URL.
type Webhook struct {
	URL    string
	Poster *Poster
}

// Send posts c.
func (w *Webhook) Send(ctx context.Context, c Change) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return w.Poster.Post(ctx, w.URL, body)
}
