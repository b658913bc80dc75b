package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The table at the end of guarantees.md names, for each figure or absolute the front page and
// the reference make, the check that would fail if it were false. These tests keep the table
// honest about its references: every check it names exists, and every claim it quotes is
// still written where it says.

const claimsPage, claimsHeading = "guarantees.md", "## Claims and the checks behind them"

// claimRow is one row of the table, with the line it is on.
type claimRow struct {
	line                      int
	claim, check, bound, runs string
}

func claimRows(t *testing.T) []claimRow {
	t.Helper()
	lines := readLines(t, claimsPage)
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == claimsHeading {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("%s has no section %q", claimsPage, claimsHeading)
	}
	var rows []claimRow
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := splitRow(l)
		if len(cells) != 4 {
			t.Errorf("%s:%d: %d cells, want 4 (claim, check, bound, where it runs)", claimsPage, i+1, len(cells))
			continue
		}
		if cells[0] == "claim" || strings.Trim(cells[0], "-: ") == "" {
			continue // the header and its rule
		}
		rows = append(rows, claimRow{i + 1, cells[0], cells[1], cells[2], cells[3]})
	}
	return rows
}

// splitRow cuts a Markdown table row into its cells; a '|' inside backticks or escaped as
// "\|" stays in its cell.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var cell strings.Builder
	code := false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case c == '`':
			code = !code
			cell.WriteByte(c)
		case c == '\\' && i+1 < len(l) && l[i+1] == '|':
			cell.WriteByte('|')
			i++
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	goTest   = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Za-z0-9_]+(/.*)?$`)
	goPkg    = regexp.MustCompile(`^\./[a-z0-9_./-]*$`)
	// A claim's place: the file, then a verbatim quote in "..." or a paraphrase.
	claimPlace = regexp.MustCompile(`^((?:README|DEVELOPMENT)\.md|docs/[a-z0-9-]+\.md)(?: \(([^)]*)\))?: (.+)$`)
)

// checks are the checks a cell names: Go tests, benchmarks and fuzz targets, each followed
// (after any others) by the package directory it is in ("`TestA`, `TestB` in
// `./internal/controller`"); make targets ("`make bench-failover`"); load-test gates
// ("`loadtest:MaxMissed`").
type checks struct {
	tests   map[string][]string // package directory -> names
	targets []string
	gates   []string
}

func parseChecks(cell string) (checks, error) {
	c := checks{tests: map[string][]string{}}
	var pending []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		s := m[1]
		switch {
		case goTest.MatchString(s):
			name, _, _ := strings.Cut(s, "/")
			pending = append(pending, name)
		case goPkg.MatchString(s):
			if len(pending) == 0 {
				return c, fmt.Errorf("package %s follows no test name", s)
			}
			c.tests[s] = append(c.tests[s], pending...)
			pending = nil
		case strings.HasPrefix(s, "make "):
			c.targets = append(c.targets, strings.Fields(s)[1])
		case strings.HasPrefix(s, "loadtest:"):
			c.gates = append(c.gates, strings.TrimPrefix(s, "loadtest:"))
		}
	}
	if len(pending) > 0 {
		return c, fmt.Errorf("%v: no package directory (`./...`) after them", pending)
	}
	return c, nil
}

func (c checks) empty() bool { return len(c.tests) == 0 && len(c.targets) == 0 && len(c.gates) == 0 }

func TestEveryClaimNamesACheckThatExists(t *testing.T) {
	rows := claimRows(t)
	if len(rows) < 20 {
		t.Fatalf("%s: %d rows under %q; the table is missing or was cut", claimsPage, len(rows), claimsHeading)
	}
	makefile := readFile(t, "../Makefile")
	for _, r := range rows {
		where := fmt.Sprintf("%s:%d", claimsPage, r.line)
		if r.bound == "" || r.runs == "" {
			t.Errorf("%s: the bound asserted and where the check runs must both be given", where)
		}
		c, err := parseChecks(r.check)
		if err != nil {
			t.Errorf("%s: check %q: %v", where, r.check, err)
			continue
		}
		if c.empty() {
			t.Errorf("%s: claim %q names no check (a `TestX` in `./pkg`, a `make target` or a `loadtest:Gate`)", where, r.claim)
		}
		for dir, names := range c.tests {
			defined := testFuncs(t, filepath.Join("..", dir))
			for _, n := range names {
				if !defined[n] {
					t.Errorf("%s: no func %s( in a _test.go file of %s", where, n, dir)
				}
			}
		}
		// The column saying where a check runs names make targets too.
		runs, _ := parseChecks(r.runs)
		for _, target := range append(c.targets, runs.targets...) {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(makefile) {
				t.Errorf("%s: the Makefile defines no target %q", where, target)
			}
		}
		for _, g := range c.gates {
			if !loadtestDefines(t, g) {
				t.Errorf("%s: tools/internal/loadtest defines no gate or check %q", where, g)
			}
		}
	}
}

// TestEveryQuotedClaimIsWrittenWhereItSays: a claim quoted between double quotes must be in
// the file the row names (white space and emphasis aside), so that a reworded claim has its
// row reworded too.
func TestEveryQuotedClaimIsWrittenWhereItSays(t *testing.T) {
	quoted := 0
	for _, r := range claimRows(t) {
		where := fmt.Sprintf("%s:%d", claimsPage, r.line)
		m := claimPlace.FindStringSubmatch(r.claim)
		if m == nil {
			t.Errorf("%s: claim %q does not start with the file that makes it (README.md: or docs/x.md:)", where, r.claim)
			continue
		}
		file, text := m[1], m[3]
		if _, err := os.Stat(filepath.Join("..", file)); err != nil {
			t.Errorf("%s: claim made in %s: no such file", where, file)
			continue
		}
		if !strings.HasPrefix(text, `"`) {
			continue // a paraphrase
		}
		end := strings.LastIndex(text, `"`)
		if end == 0 {
			t.Errorf("%s: unterminated quote in %q", where, r.claim)
			continue
		}
		quoted++
		if q := prose(text[1:end]); !strings.Contains(prose(readFile(t, filepath.Join("..", file))), q) {
			t.Errorf("%s: %s does not say %q", where, file, q)
		}
	}
	if quoted == 0 {
		t.Fatal("no claim is quoted: the quote pattern or the table is wrong")
	}
}

func TestClaimChecksParse(t *testing.T) {
	c, err := parseChecks("`TestA`, `TestB/sub` in `./internal/x`; `BenchmarkC` in `./y`; `make bench-10k`, `loadtest:MaxMissed`")
	testutil.Must(t, err)
	if got := fmt.Sprint(c.tests["./internal/x"], c.tests["./y"], c.targets, c.gates); got != "[TestA TestB] [BenchmarkC] [bench-10k] [MaxMissed]" {
		t.Errorf("parsed %s", got)
	}
	if _, err := parseChecks("`TestA` and nothing else"); err == nil {
		t.Error("a test name without its package was accepted")
	}
	if got := splitRow("| a `x|y` | b \\| c | d |"); len(got) != 3 || got[0] != "a `x|y`" || got[1] != "b | c" {
		t.Errorf("splitRow: %q", got)
	}
	if prose("**No  missed**\nreloads.") != "No missed reloads." {
		t.Errorf("prose: %q", prose("**No  missed**\nreloads."))
	}
}

// prose is Markdown text as read: emphasis marks dropped, white space runs made one space.
func prose(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "**", "")), " ")
}

var testFuncPattern = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)

// testFuncs gives the tests, benchmarks and fuzz targets defined in dir's _test.go files.
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	testutil.Must(t, err)
	found := map[string]bool{}
	for _, f := range files {
		for _, m := range testFuncPattern.FindAllStringSubmatch(readFile(t, f), -1) {
			found[m[1]] = true
		}
	}
	return found
}

// loadtestDefines reports whether the load-test tool's own (non-test) sources define name as
// a word: a field of Gates, a check of a scenario, a flag.
func loadtestDefines(t *testing.T, name string) bool {
	t.Helper()
	files, err := filepath.Glob("../tools/internal/loadtest/*.go")
	testutil.Must(t, err)
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && word.MatchString(readFile(t, f)) {
			return true
		}
	}
	return false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	testutil.Must(t, err)
	return string(b)
}
