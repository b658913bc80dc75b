// Package docs holds reloader's user documentation; its test keeps the links between the
// pages, and into the repository, from going stale as sections move.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The pages a reader moves between: the front page, the developer guide and docs/.
func pages(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob("*.md")
	testutil.Must(t, err)
	pages := append([]string{"../README.md", "../DEVELOPMENT.md"}, found...)
	if len(found) == 0 {
		t.Fatal("no pages in docs/")
	}
	return pages
}

var (
	linkPattern    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingPattern = regexp.MustCompile(`^#{1,6} +(.+?) *$`)
)

func TestRelativeLinksAndAnchorsResolve(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(page string) map[string]bool {
		if a, ok := anchorsOf[page]; ok {
			return a
		}
		a := headingAnchors(readLines(t, page))
		anchorsOf[page] = a
		return a
	}
	checked := 0
	for _, page := range pages(t) {
		for n, line := range readLines(t, page) {
			for _, m := range linkPattern.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: link %q: no such file %s", page, n+1, target, file)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", page, n+1, target)
					continue
				}
				if !anchors(file)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", page, n+1, target, file, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the pattern or the pages are wrong")
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	got := headingAnchors([]string{
		"# Switching from Stakater Reloader",
		"## RBAC: least privilege, from one table",
		"### `-o json`",
		"## Figures at 10,000 objects",
		"## Did the reload work?",
		"```sh",
		"# not a heading",
		"```",
		"### RBAC",
		"### RBAC",
	})
	for _, want := range []string{
		"switching-from-stakater-reloader", "rbac-least-privilege-from-one-table", "-o-json",
		"figures-at-10000-objects", "did-the-reload-work", "rbac", "rbac-1",
	} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block was taken as a heading")
	}
}

// headingAnchors gives the anchors GitHub renders for a page's headings: lower case, only
// letters, digits, spaces, '-' and '_' kept, spaces turned into '-', and a repeated
// heading numbered from -1 on.
func headingAnchors(lines []string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range lines {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		m := headingPattern.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, m[1])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	testutil.Must(t, err)
	return strings.Split(string(b), "\n")
}
