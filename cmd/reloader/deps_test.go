package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/reloader-operator/reloader"

// toolingElems are path elements that name load-test, benchmark or demo tooling; no package of
// the product module is named so (such code belongs in the tools module, tools/).
var toolingElems = []string{"tools", "devtools", "loadtest", "scalebench", "failover", "failoverbench", "demo", "localcluster", "rssfloor", "bench"}

// linkedTooling says why pkg must not be linked into the reloader binary, or "".
func linkedTooling(pkg string) string {
	switch {
	case pkg == module+"/tools" || strings.HasPrefix(pkg, module+"/tools/"):
		return "a package of the tools module"
	case pkg == "testing" || strings.HasPrefix(pkg, "testing/"),
		strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/envtest"),
		pkg == module+"/internal/testenv" || strings.HasPrefix(pkg, module+"/internal/testenv/"),
		pkg == module+"/internal/testutil" || strings.HasPrefix(pkg, module+"/internal/testutil/"):
		return "test support"
	case strings.HasPrefix(pkg, module+"/"):
		for _, elem := range strings.Split(strings.TrimPrefix(pkg, module+"/"), "/") {
			if slices.Contains(toolingElems, elem) {
				return "load-test, benchmark or demo tooling (" + elem + ")"
			}
		}
	}
	return ""
}

// The reloader binary links only product code: no load-test, benchmark or demo package, no
// package of the tools module, and no test support (testing, envtest, internal/testenv), as
// `go list -deps ./cmd/reloader` lists what it links.
func TestBinaryLinksNoTooling(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go toolchain is not on PATH, and only `go list -deps` tells what the binary links: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps .: %v\n%s", err, stderr)
	}
	pkgs := strings.Fields(string(out))
	// The list is the binary's: it ends with this package, and holds the product's own.
	if !slices.Contains(pkgs, module+"/cmd/reloader") || !slices.Contains(pkgs, module+"/internal/reload") {
		t.Fatalf("go list -deps . did not list cmd/reloader and internal/reload: %q", pkgs)
	}
	for _, pkg := range pkgs {
		if why := linkedTooling(pkg); why != "" {
			t.Errorf("cmd/reloader links %s: %s", pkg, why)
		}
	}
}

// linkedTooling knows tooling from product code by path, whatever the depth.
func TestLinkedToolingNamesTooling(t *testing.T) {
	for pkg, tooling := range map[string]bool{
		module + "/tools/internal/loadtest":          true,
		module + "/tools/cmd/demo":                   true,
		module + "/internal/devtools/scalebench":     true,
		module + "/internal/testenv":                 true,
		module + "/internal/testenv/proc":            true,
		module + "/internal/testutil":                true,
		module + "/internal/shard/failover":          true,
		"testing":                                    true,
		"sigs.k8s.io/controller-runtime/pkg/envtest": true,
		module + "/internal/reload":                  false,
		module + "/internal/controller/generic":      false,
		module + "/cmd/reloader":                     false,
		module + "/internal/cachemem/shrink":         false,
		"sigs.k8s.io/controller-runtime/pkg/client":  false,
		"github.com/example/demo":                    false,
	} {
		if got := linkedTooling(pkg) != ""; got != tooling {
			t.Errorf("linkedTooling(%q) names tooling: %v, want %v", pkg, got, tooling)
		}
	}
}
