package workload_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/workload"
)

// load parses args into a Config as cmd/reloader does, over the kinds given.
func load(t *testing.T, kinds workload.Catalog, args ...string) (options.Config, error) {
	t.Helper()
	o := options.Default()
	o.Kinds = kinds
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return options.Parse(o)
}

// TestANewKindIsOneFile: a kind described in one file (replicaset_test.go) and added to the
// catalog is a value of --ignored-workload-types, is watched and read, gets its RBAC rule,
// and is a name `reloader explain` and `plan` accept, with no other edit. Without it, none
// of these know it: the catalog is where they all come from.
func TestANewKindIsOneFile(t *testing.T) {
	kinds := workload.Known().With(replicaSet{})

	fs := pflag.NewFlagSet("help", pflag.ContinueOnError)
	o := options.Default()
	o.Kinds = kinds
	o.BindFlags(fs)
	if usage := fs.Lookup("ignored-workload-types").Usage; !strings.Contains(usage, "replicasets") {
		t.Errorf("--ignored-workload-types help does not list replicasets: %s", usage)
	}

	conf, err := load(t, kinds)
	if err != nil {
		t.Fatal(err)
	}
	all := func(workload.Kind) bool { return true }
	if reconciled, read := conf.WorkloadKinds(all); !hasKind(reconciled, "ReplicaSet") || !hasKind(read, "ReplicaSet") {
		t.Errorf("ReplicaSets not watched: reconciled %v, read %v", names(reconciled), names(read))
	}
	grants := rbac.Grants(rbac.For(conf, rbac.Platform{}).Watched)
	for _, g := range []string{"apps/replicasets:get", "apps/replicasets:list", "apps/replicasets:watch", "apps/replicasets:patch"} {
		if !slices.Contains(grants, g) {
			t.Errorf("RBAC lacks %s: %v", g, grants)
		}
	}
	for _, arg := range []string{"rs/web", "ReplicaSets/web", "replicaset.apps/web"} {
		if target, err := explain.ParseTargetOf(kinds, arg); err != nil || target.Workload == nil || target.Workload.Name() != "ReplicaSet" {
			t.Errorf("explain %s: %+v, %v", arg, target, err)
		}
	}

	ignored, err := load(t, kinds, "--ignored-workload-types=ReplicaSet")
	if err != nil {
		t.Fatalf("--ignored-workload-types=ReplicaSet refused: %v", err)
	}
	if reconciled, _ := ignored.WorkloadKinds(all); hasKind(reconciled, "ReplicaSet") {
		t.Error("ReplicaSets watched though ignored")
	}
	if g := rbac.Grants(rbac.For(ignored, rbac.Platform{}).Watched); slices.Contains(g, "apps/replicasets:patch") {
		t.Errorf("RBAC patches ignored ReplicaSets: %v", g)
	}

	// The same, without the kind in the catalog.
	if _, err := load(t, nil, "--ignored-workload-types=replicasets"); err == nil || !strings.Contains(err.Error(), "is not one of") {
		t.Errorf("replicasets accepted by a catalog without them: %v", err)
	}
	if _, err := explain.ParseTarget("rs/web"); err == nil {
		t.Error("explain accepts rs/web from a catalog without ReplicaSets")
	}
	known, _ := load(t, nil)
	if slices.Contains(rbac.Grants(rbac.For(known, rbac.Platform{}).Watched), "apps/replicasets:patch") {
		t.Error("RBAC patches ReplicaSets from a catalog without them")
	}
}

func hasKind(kinds []workload.Kind, name string) bool {
	return slices.ContainsFunc(kinds, func(k workload.Kind) bool { return k.Name() == name })
}

func names(kinds []workload.Kind) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Name())
	}
	return out
}
