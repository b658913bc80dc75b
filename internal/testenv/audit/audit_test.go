package audit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestReadKeepsOneUsersEventsAndSkipsNoise(t *testing.T) {
	log := `{"verb":"patch","user":{"username":"sa"},"objectRef":{"resource":"deployments","apiGroup":"apps","namespace":"a","name":"web"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-22T03:00:00.000000Z"}
not json
{"verb":"list","user":{"username":"admin"},"objectRef":{"resource":"secrets"},"responseStatus":{"code":200}}
{"verb":"create","user":{"username":"sa"},"objectRef":{"resource":"serviceaccounts","subresource":"token","namespace":"a","name":"r"},"responseStatus":{"code":403}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	testutil.Must(t, os.WriteFile(path, []byte(log), 0o600))
	events, err := Read(path, "sa")
	testutil.Must(t, err)
	if len(events) != 2 {
		t.Fatalf("got %d events of sa, want 2: %+v", len(events), events)
	}
	if got, want := events[0].Request(), "patch apps/deployments (namespace a name web)"; got != want {
		t.Errorf("Request() = %q, want %q", got, want)
	}
	if got, want := events[1].Request(), "create serviceaccounts/token (namespace a name r)"; got != want {
		t.Errorf("Request() = %q, want %q", got, want)
	}
	if events[0].Received.IsZero() || events[1].ResponseStatus.Code != 403 {
		t.Errorf("fields not read: %+v", events)
	}
}
