// Command image builds reloader's OCI image for linux/amd64, linux/arm64 and linux/arm/v7 without a
// container engine: an OCI layout and one `docker load`-able tarball per architecture.
//
//	go run ./cmd/image --out ../dist --version v1.2.3 --commit <sha>
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/reloader-operator/reloader/deployments/image"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "../dist", "directory for the OCI layout (oci/) and the tarballs")
	version := fs.String("version", "dev", "version stamped into the binary, the labels and the tag")
	commit := fs.String("commit", "unknown", "git commit stamped into the binary and the labels")
	repoRoot := fs.String("repo", "..", "directory of the main module, where ./cmd/reloader is built")
	repository := fs.String("repository", image.DefaultRepository, "repository the tarballs are tagged with")
	arches := fs.String("arch", strings.Join(image.Arches, ","), "comma-separated architectures")
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
	r, err := image.Build(ctx, image.Options{
		RepoRoot: root,
		Arches:   strings.Split(*arches, ","),
		Metadata: image.Metadata{Version: *version, Commit: *commit, Created: created},
	})
	if err != nil {
		return err
	}
	o, err := image.Write(*out, *repository, r)
	if err != nil {
		return err
	}
	return report(stdout, r, o)
}

// report prints what was built: the digests a user can check a copy against.
func report(w io.Writer, r *image.Result, o *image.Outputs) error {
	digest, err := r.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (created %s)\n", o.Ref, r.Meta.Created.Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(w, "  index  %s  %s\n", digest, o.Layout)
	for _, arch := range r.Arches {
		img := r.Images[arch]
		d, err := img.Digest()
		if err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		size, err := layers[0].Size()
		if err != nil {
			return err
		}
		fi, err := os.Stat(o.Tarballs[arch])
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-12s %s  layer %.1f MB gzip  %s (%.1f MB)\n",
			image.Platform(arch), d, float64(size)/1e6, o.Tarballs[arch], float64(fi.Size())/1e6)
	}
	return nil
}
