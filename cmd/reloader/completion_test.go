package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// helpOf runs cmd with args and returns what it printed.
func helpOf(t *testing.T, cmd *cobra.Command, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestHelpNamesItself: under each name the binary has, help, usage lines and examples name
// the command as the user types it.
func TestHelpNamesItself(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmd     func() *cobra.Command
		notLike []string // how the other name, or cobra's default, would show
	}{
		{"reloader", func() *cobra.Command { return newRootCommand(nil) }, []string{"kubectl reloader", "kubectl-reloader"}},
		{"kubectl reloader", newPluginCommand, []string{"\n  reloader ", "kubectl explain", "kubectl-reloader explain", "kubectl-reloader [command]"}},
	} {
		root := helpOf(t, tc.cmd(), "--help")
		explainHelp := helpOf(t, tc.cmd(), "explain", "--help")
		for _, want := range []string{
			"\n  " + tc.name + " [command]\n",
			"Use \"" + tc.name + " [command] --help\"",
		} {
			if !strings.Contains(root, want) {
				t.Errorf("%s --help lacks %q:\n%s", tc.name, want, root)
			}
		}
		for _, want := range []string{
			"Usage:\n  " + tc.name + " explain <kind>/<name> [flags]",
			"\n  " + tc.name + " explain deployment/web -n shop\n",
			"\n  " + tc.name + " explain configmap/app-config -n shop\n",
		} {
			if !strings.Contains(explainHelp, want) {
				t.Errorf("%s explain --help lacks %q:\n%s", tc.name, want, explainHelp)
			}
		}
		for _, bad := range tc.notLike {
			for what, text := range map[string]string{"--help": root, "explain --help": explainHelp} {
				if strings.Contains(text, bad) {
					t.Errorf("%s %s says %q:\n%s", tc.name, what, bad, text)
				}
			}
		}
	}
}

// TestCompletionScripts: `reloader completion <shell>` prints a script that completes the
// command named reloader, for each shell cobra supports; the bash one is checked by bash.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "complete -o default -F __start_reloader reloader",
		"zsh":        "#compdef reloader",
		"fish":       "complete -c reloader ",
		"powershell": "Register-ArgumentCompleter -CommandName 'reloader'",
	} {
		script := helpOf(t, newRootCommand(nil), "completion", shell)
		if !strings.Contains(script, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
		if strings.Contains(script, "kubectl") {
			t.Errorf("completion %s mentions kubectl", shell)
		}
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Log("no bash: the bash script is not loaded")
			continue
		}
		// Loaded as a user's shell would, it registers the completion function.
		cmd := exec.Command(bash, "-c", `source /dev/stdin && complete -p reloader`)
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "__start_reloader") {
			t.Errorf("bash did not load the script: %v\n%s", err, out)
		}
	}
	// kubectl completes its plugins through kubectl_complete-reloader instead.
	if out := helpOf(t, newPluginCommand(), "--help"); strings.Contains(out, "\n  completion ") {
		t.Errorf("kubectl reloader offers a completion command:\n%s", out)
	}
}

// TestKubectlPluginCompletion runs deployments/krew/kubectl_complete-reloader as kubectl
// 1.26+ does for `kubectl reloader <TAB>`, with a kubectl-reloader built from this package on
// the PATH, and reads cobra's completion protocol back.
func TestKubectlPluginCompletion(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, pluginName), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script, err := filepath.Abs("../../deployments/krew/kubectl_complete-reloader")
	testutil.Must(t, err)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"explain\t", "\n:4\n"}},
		{[]string{"explain", "deploy/web", "--con"}, []string{"--context\t", "\n:4\n"}},
		{[]string{"explain", "deploy/web", "-o", ""}, nil},
	} {
		cmd := exec.Command(script, tc.args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl_complete-reloader %q: %v\n%s", tc.args, err, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, ":") && !strings.Contains(out, "\n:") {
			t.Errorf("kubectl_complete-reloader %q printed no completion directive:\n%s", tc.args, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl_complete-reloader %q lacks %q:\n%s", tc.args, want, out)
			}
		}
	}
}
