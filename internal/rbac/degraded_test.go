package rbac_test

import (
	"testing"

	"github.com/reloader-operator/reloader/internal/rbac"
)

func TestFormat(t *testing.T) {
	got := rbac.Format(rbac.WatchRule("apps", "deployments"))
	if want := `apiGroups: ["apps"], resources: ["deployments"], verbs: ["watch"]`; got != want {
		t.Errorf("%s; want %s", got, want)
	}
	if got := rbac.Format(rbac.WatchRule("", "configmaps")); got != `apiGroups: [""], resources: ["configmaps"], verbs: ["watch"]` {
		t.Errorf("core group: %s", got)
	}
}
