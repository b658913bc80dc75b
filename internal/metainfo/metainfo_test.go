package metainfo

import (
	"encoding/json"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/version"
)

// The meta-info ConfigMap and `reloader --version` describe the build alike, including a
// release build's stamped version and commit; the JSON keys stay upstream's.
func TestBuildInfoComesFromTheVersionPackage(t *testing.T) {
	oldV, oldC := version.Version, version.Commit
	t.Cleanup(func() { version.Version, version.Commit = oldV, oldC })
	version.Version, version.Commit = "v9.8.7", "abc123"

	data, err := (&Publisher{}).Data()
	testutil.Must(t, err)
	var got map[string]any
	testutil.Must(t, json.Unmarshal([]byte(data["buildInfo"]), &got))
	want := version.Get()
	if got["releaseVersion"] != "v9.8.7" || got["commitHash"] != "abc123" || got["goVersion"] != want.GoVersion {
		t.Errorf("buildInfo %v, want version %s, commit abc123, %s", got, "v9.8.7", want.GoVersion)
	}
}
