// Command dist builds a release's files besides the image: the binary archives for each
// platform, the chart package, the krew manifest and checksums.txt (see package release).
//
//	go run ./cmd/dist --out ../dist --version v1.2.3 --commit <sha>
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/reloader-operator/reloader/deployments/image"
	"github.com/reloader-operator/reloader/deployments/release"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	out := fs.String("out", "../dist", "directory for the release files")
	version := fs.String("version", "dev", "version (the release tag) stamped into the binaries and naming the files")
	commit := fs.String("commit", "unknown", "git commit stamped into the binaries")
	repoRoot := fs.String("repo", "..", "directory of the main module")
	githubRepo := fs.String("github-repo", release.DefaultGitHubRepo, "owner/name the release is downloaded from (the krew manifest's URLs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := filepath.Abs(*repoRoot)
	if err != nil {
		return err
	}
	created, err := image.SourceDate(ctx, root)
	if err != nil {
		return err
	}
	a, err := release.Build(ctx, *out, release.Options{
		RepoRoot: root, Version: *version, Commit: *commit, Created: created, GitHubRepo: *githubRepo,
	})
	if err != nil {
		return err
	}
	if a.Krew == "" {
		fmt.Fprintf(stdout, "no krew manifest: %q is no release tag (vX.Y.Z)\n", *version)
	}
	names := make([]string, 0, len(a.Sums))
	for name := range a.Sums {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(a.Dir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s  %-46s %8.1f kB\n", a.Sums[name], name, float64(fi.Size())/1e3)
	}
	fmt.Fprintf(stdout, "%s\n", filepath.Join(a.Dir, release.ChecksumsFile))
	return nil
}
