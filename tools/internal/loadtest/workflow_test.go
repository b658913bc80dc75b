package loadtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/internal/testutil"
)

const actionlintVersion = "v1.7.12"

// actionlint installs the pinned actionlint once (through hack/tool.sh when the tree has it,
// into the same cache directory otherwise) and returns its path.
func actionlint(t *testing.T, root string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "hack", "tool.sh")); err == nil {
		out, err := exec.Command("bash", filepath.Join(root, "hack", "tool.sh"), "actionlint").Output()
		if err != nil {
			t.Fatalf("hack/tool.sh actionlint: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	cache, err := os.UserCacheDir()
	testutil.Must(t, err)
	dir := filepath.Join(cache, "reloader", "tools", "actionlint-"+actionlintVersion)
	bin := filepath.Join(dir, "actionlint")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command("go", "install", "github.com/rhysd/actionlint/cmd/actionlint@"+actionlintVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("installing actionlint: %v\n%s", err, out)
		}
	}
	return bin
}

// The load-test workflow lints clean with actionlint (and shellcheck, when installed), runs
// on the load-tests label, a /loadtest comment and nightly, and calls only scripts and make
// targets that exist; the lint catches a known mistake, so it checks something.
func TestLoadTestWorkflow(t *testing.T) {
	root, err := filepath.Abs("../../..")
	testutil.Must(t, err)
	path := filepath.Join(root, ".github", "workflows", "loadtest.yaml")
	raw, err := os.ReadFile(path)
	testutil.Must(t, err)
	lint := actionlint(t, root)
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("no shellcheck on the PATH: run: scripts are not checked by it")
	}
	if out, err := exec.Command(lint, "-color=false", path).CombinedOutput(); err != nil {
		t.Errorf("actionlint %s: %v\n%s", path, err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	testutil.Must(t, os.WriteFile(bad, []byte("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ steps.nope.outputs.x }}\n"), 0o644))
	if out, err := exec.Command(lint, "-color=false", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "steps.nope") {
		t.Errorf("actionlint passed a workflow that reads an undefined step: %v\n%s", err, out)
	}

	type triggers struct {
		PullRequest  map[string][]string `json:"pull_request"`
		IssueComment map[string][]string `json:"issue_comment"`
		Schedule     []map[string]string `json:"schedule"`
	}
	var wf struct {
		On triggers `json:"on"`
		// YAML 1.1 reads the key on as true.
		True        triggers          `json:"true"`
		Permissions map[string]string `json:"permissions"`
		Jobs        map[string]struct {
			If          string            `json:"if"`
			Permissions map[string]string `json:"permissions"`
			Steps       []struct {
				ID  string `json:"id"`
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	testutil.Must(t, yaml.Unmarshal(raw, &wf))
	if wf.On.PullRequest == nil {
		wf.On = wf.True
	}
	if !strings.Contains(strings.Join(wf.On.PullRequest["types"], ","), "labeled") || len(wf.On.IssueComment["types"]) == 0 || len(wf.On.Schedule) == 0 {
		t.Errorf("triggers: %+v", wf.On)
	}
	job := wf.Jobs["loadtest"]
	for _, want := range []string{"'load-tests'", "'/loadtest'", "author_association", "'schedule'"} {
		if !strings.Contains(job.If, want) {
			t.Errorf("the loadtest job's condition lacks %s: %s", want, job.If)
		}
	}
	// The job that runs the pull request's code can't write; only the comment job can.
	if len(wf.Permissions) != 0 || job.Permissions["contents"] != "read" || strings.Contains(strings.Join(mapValues(job.Permissions), ","), "write") ||
		wf.Jobs["comment"].Permissions["pull-requests"] != "write" {
		t.Errorf("permissions: workflow %v, loadtest %v, comment %v", wf.Permissions, job.Permissions, wf.Jobs["comment"].Permissions)
	}
	for _, m := range regexp.MustCompile(`uses:\s*(\S+)(.*)`).FindAllStringSubmatch(string(raw), -1) {
		if !regexp.MustCompile(`@[0-9a-f]{40}$`).MatchString(m[1]) || !strings.Contains(m[2], "# v") {
			t.Errorf("uses %s%s: want owner/repo@<commit sha> # vX.Y.Z", m[1], m[2])
		}
	}
	for _, want := range []string{"hack/loadtest-ci.sh", "report.md", "report.*", "gh pr comment"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the workflow does not use %s", want)
		}
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "loadtest-ci.sh"))
	testutil.Must(t, err)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	testutil.Must(t, err)
	for _, target := range []string{"loadtest-quick", "loadtest-full", "build"} {
		if !strings.Contains(string(makefile), "\n"+target+":") {
			t.Errorf("the Makefile has no %s target", target)
		}
	}
	if !strings.Contains(string(script), `make "loadtest-$set_name"`) || !strings.Contains(string(script), "hack/upstream-binary.sh") {
		t.Error("hack/loadtest-ci.sh does not run the make targets or build upstream")
	}
	// The step that reads the event, run as the runner would: a comment names the pull
	// request and its scenarios, the nightly run is the full set against upstream.
	var what string
	for _, st := range job.Steps {
		if st.ID == "what" {
			what = st.Run
		}
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"EVENT=issue_comment", "COMMENT=/loadtest S1,S7\nthanks", "PR_NUMBER=42"}, "set=quick scenarios=S1,S7 old=base pr=42"},
		{[]string{"EVENT=pull_request", "PR_NUMBER=7"}, "set=quick scenarios= old=base pr=7"},
		{[]string{"EVENT=schedule"}, "set=full scenarios= old=upstream pr="},
	} {
		out := filepath.Join(t.TempDir(), "output")
		cmd := exec.Command("bash", "-e", "-c", what)
		cmd.Env = append(append(os.Environ(), "GITHUB_OUTPUT="+out), c.env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step what: %v\n%s", err, b)
		}
		got, _ := os.ReadFile(out)
		if strings.Join(strings.Fields(string(got)), " ") != c.want {
			t.Errorf("step what with %v: %q, want %q", c.env, got, c.want)
		}
	}
	// The comment's scenarios reach the shell only through a checked variable.
	for _, c := range []struct {
		scenarios string
		ok        bool
	}{{"S1,S7", true}, {"all", true}, {"S1;touch x", false}, {"$(id)", false}} {
		cmd := exec.Command("bash", filepath.Join(root, "hack", "loadtest-ci.sh"), "check-only")
		cmd.Env = append(os.Environ(), "LOADTEST_SCENARIOS="+c.scenarios)
		out, _ := cmd.CombinedOutput()
		if rejected := strings.Contains(string(out), "are not a list"); rejected == c.ok {
			t.Errorf("scenarios %q: %s", c.scenarios, out)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
