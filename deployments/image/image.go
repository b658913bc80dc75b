// Package image assembles reloader's OCI image without a container engine or a registry:
// an empty base, one reproducible layer (the static binary, a CA bundle, a non-root user and
// /tmp), a config that runs the binary as that user, and an index over the architectures.
package image

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// MetricsPort is where reloader serves /metrics, /live and /ready by default.
const MetricsPort = "9090/tcp"

// DefaultSource is the repository the image is built from.
const DefaultSource = "https://github.com/reloader-operator/reloader"

// Metadata identifies one build of the image.
type Metadata struct {
	Version string
	Commit  string
	// Created is the image's creation time and the mtime of its files: a time fixed by
	// the source (the commit time or SOURCE_DATE_EPOCH), never the clock, so that
	// builds repeat.
	Created time.Time
	// Source is the repository URL; empty means DefaultSource.
	Source string
}

// Labels are the OCI annotations of the image config and of the index.
func (m Metadata) Labels() map[string]string {
	source := m.Source
	if source == "" {
		source = DefaultSource
	}
	return map[string]string{
		"org.opencontainers.image.title":       "reloader",
		"org.opencontainers.image.description": "Rolls Kubernetes workloads when the ConfigMaps and Secrets they use change; a drop-in replacement for Stakater Reloader.",
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.version":     m.Version,
		"org.opencontainers.image.revision":    m.Commit,
		"org.opencontainers.image.created":     m.Created.UTC().Format(time.RFC3339),
	}
}

// Image builds the linux/<arch> (and Variant) image around a root filesystem tar made by RootFS.
func Image(arch string, rootfs []byte, meta Metadata) (v1.Image, error) {
	layer, err := gzipLayer(rootfs)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: meta.Created.UTC().Truncate(time.Second)}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		Variant:      Variant(arch),
		OS:           "linux",
		Created:      created,
		Config: v1.Config{
			Entrypoint:   []string{BinaryPath},
			User:         userSpec(),
			WorkingDir:   "/",
			ExposedPorts: map[string]struct{}{MetricsPort: {}},
			Labels:       meta.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "reloader image builder (deployments/cmd/image)", Comment: "static binary, CA bundle, nonroot user, /tmp"},
	})
}

// Index is the multi-architecture index over images, in the order given.
func Index(images map[string]v1.Image, arches []string, meta Metadata) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        plainImage{images[arch]},
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch, Variant: Variant(arch)}},
		})
	}
	return mutate.Annotations(idx, meta.Labels()).(v1.ImageIndex)
}

// plainImage is described in the index as an image, not as an artifact: go-containerregistry
// otherwise sets each descriptor's artifactType to the config media type, which OCI reserves
// for artifacts, docker buildx never writes, and older copy tools drop (changing the digest).
type plainImage struct{ v1.Image }

// Descriptor is what the index lists for the image.
func (i plainImage) Descriptor() (*v1.Descriptor, error) {
	d := &v1.Descriptor{}
	var err error
	if d.MediaType, err = i.MediaType(); err != nil {
		return nil, err
	}
	if d.Size, err = i.Size(); err != nil {
		return nil, err
	}
	if d.Digest, err = i.Digest(); err != nil {
		return nil, err
	}
	return d, nil
}

// gzipLayer compresses the tar once, with the standard library's gzip (no header time), so
// the layer digest depends only on the tar and the Go toolchain.
func gzipLayer(rootfs []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(rootfs); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// userSpec is the config's User: numeric, so that a runtime (and a PodSecurity
// runAsNonRoot check) needs no /etc/passwd lookup to know it isn't root.
func userSpec() string {
	return strconv.Itoa(NonRootUID) + ":" + strconv.Itoa(NonRootGID)
}
