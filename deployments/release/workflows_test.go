package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// workflows are the repository's GitHub Actions workflows.
func workflows(t *testing.T) (root string, paths []string) {
	t.Helper()
	root = testOptions(t).RepoRoot
	paths, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yaml"))
	testutil.Must(t, err)
	if len(paths) < 2 {
		t.Fatalf("workflows %v, want at least release.yaml and ci.yaml", paths)
	}
	return root, paths
}

// tool installs (once, cached) and returns a command hack/tool.sh pins.
func tool(t *testing.T, root, name string) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(root, "hack", "tool.sh"), name).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("hack/tool.sh %s: %v\n%s", name, err, msg)
	}
	return strings.TrimSpace(string(out))
}

// TestWorkflowsLint runs actionlint (the version hack/tool.sh pins) over the workflows: any
// finding fails. With shellcheck on the PATH, actionlint checks the run: scripts with it too.
// A workflow with a known mistake must fail, so a linter that checks nothing can't pass.
func TestWorkflowsLint(t *testing.T) {
	root, paths := workflows(t)
	actionlint := tool(t, root, "actionlint")
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("no shellcheck on the PATH: run: scripts are not checked by it")
	}
	lint := func(files ...string) (string, error) {
		cmd := exec.Command(actionlint, append([]string{"-color=false"}, files...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := lint(paths...); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	testutil.Must(t, os.WriteFile(bad, []byte("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ steps.nope.outputs.x }}\n"), 0o644))
	if out, err := lint(bad); err == nil || !strings.Contains(out, "steps.nope") {
		t.Errorf("actionlint passed a workflow that reads an undefined step: %v\n%s", err, out)
	}
}

var (
	usesLine   = regexp.MustCompile(`(?m)^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	pinnedUses = regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	versionTag = regexp.MustCompile(`^\s+# v\d+\.\d+\.\d+$`)
	makeTarget = regexp.MustCompile(`\bmake ([a-z-]+)`)
	toolName   = regexp.MustCompile(`hack/tool\.sh ([a-z-]+)`)
)

// TestWorkflowsPinnedAndMinimal: every action is pinned by commit with the version it is
// in a comment, each workflow sets its permissions (none by default), and every make target
// and hack/tool.sh tool the workflows call exists.
func TestWorkflowsPinnedAndMinimal(t *testing.T) {
	root, paths := workflows(t)
	makefile := string(mustRead(t, filepath.Join(root, "Makefile")))
	toolScript := string(mustRead(t, filepath.Join(root, "hack", "tool.sh")))
	for _, path := range paths {
		raw := mustRead(t, path)
		name := filepath.Base(path)
		for _, m := range usesLine.FindAllStringSubmatch(string(raw), -1) {
			if !pinnedUses.MatchString(m[1]) || !versionTag.MatchString(m[2]) {
				t.Errorf("%s: uses %s%s: want owner/repo@<commit sha> # vX.Y.Z", name, m[1], m[2])
			}
		}
		var wf struct {
			Permissions *map[string]string `json:"permissions"`
			Jobs        map[string]struct {
				Permissions map[string]string `json:"permissions"`
			} `json:"jobs"`
		}
		if err := yaml.Unmarshal(raw, &wf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if wf.Permissions == nil {
			t.Errorf("%s: no top-level permissions: the token would get the repository's defaults", name)
		}
		for _, m := range makeTarget.FindAllStringSubmatch(withoutComments(raw), -1) {
			if !strings.Contains(makefile, "\n"+m[1]+":") {
				t.Errorf("%s runs make %s, which the Makefile has no target for", name, m[1])
			}
		}
		for _, m := range toolName.FindAllStringSubmatch(string(raw), -1) {
			if !strings.Contains(toolScript, "\n"+m[1]+") ") {
				t.Errorf("%s asks hack/tool.sh for %s, which it does not pin", name, m[1])
			}
		}
	}
	release := mustRead(t, filepath.Join(root, ".github", "workflows", "release.yaml"))
	for _, want := range []string{"make image", "make dist", "make sbom", "cosign sign --yes", "cosign attest", "id-token: write"} {
		if !bytes.Contains(release, []byte(want)) {
			t.Errorf("release.yaml does not %s", want)
		}
	}
}

// withoutComments is a workflow without its comment lines, whose words run nothing.
func withoutComments(raw []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
