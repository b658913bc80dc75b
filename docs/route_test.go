package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// DEVELOPMENT.md's route names, in order, the files a ConfigMap change passes from the
// informer to the PATCH. A file moved or renamed would leave the route pointing at nothing.

const routeHeading, maxRouteFiles = "## From a ConfigMap change to the patch", 20

// routePath is a file named by its path from the repository root: `internal/.../x.go`.
var routePath = regexp.MustCompile("`((?:internal|cmd|api)/[A-Za-z0-9_./-]+\\.go)`")

// routeFiles are the files the route names, in the order it names them first.
func routeFiles(t *testing.T) []string {
	t.Helper()
	lines := readLines(t, "../DEVELOPMENT.md")
	var files []string
	seen := map[string]bool{}
	in := false
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l) == routeHeading:
			in = true
			continue
		case in && strings.HasPrefix(l, "## "):
			in = false
		}
		if !in {
			continue
		}
		for _, m := range routePath.FindAllStringSubmatch(l, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				files = append(files, m[1])
			}
		}
	}
	return files
}

func TestTheRouteOfAChangeNamesFilesThatExist(t *testing.T) {
	files := routeFiles(t)
	if len(files) < 5 {
		t.Fatalf("the route (%q in DEVELOPMENT.md) names %d files by path: %v; want it to name the route", routeHeading, len(files), files)
	}
	if len(files) > maxRouteFiles {
		t.Errorf("the route names %d files; a change should reach the PATCH through at most %d: %v", len(files), maxRouteFiles, files)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("the route names %s, which does not exist: %v", f, err)
		}
	}
}
