package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Where things are in the image, and who runs it.
const (
	// BinaryPath is the reloader binary, the image's entrypoint.
	BinaryPath = "/reloader"
	// CABundlePath is the first place Go's crypto/x509 looks for roots on Linux.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// NonRootUID and NonRootGID are the user "nonroot" the image runs as: the id distroless
	// images use, so existing PodSecurity settings and volume ownership keep working.
	NonRootUID = 65532
	NonRootGID = 65532
)

// entry is one file or directory of the layer.
type entry struct {
	path     string // relative, no leading slash; directories end in "/"
	mode     int64  // permission bits, plus 01000 for the sticky bit
	uid, gid int
	data     []byte
}

func (e entry) isDir() bool { return strings.HasSuffix(e.path, "/") }

// entries lists everything in the image: no shell, no package manager, nothing to exec but
// reloader itself.
func entries(binary []byte) []entry {
	return []entry{
		{path: "etc/", mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:\nnonroot:x:%d:\n", NonRootGID))},
		{path: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootGID))},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: CABundle()},
		{path: "home/", mode: 0o755},
		{path: "home/nonroot/", mode: 0o700, uid: NonRootUID, gid: NonRootGID},
		{path: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: binary},
		// Sticky and world-writable, as /tmp is everywhere, so that any uid a cluster
		// assigns can write there (an emptyDir usually covers it when the root is read-only).
		{path: "tmp/", mode: 0o1777},
	}
}

// RootFS returns the image's only layer as an uncompressed tar. It is reproducible: entries
// are sorted by path and their owners, modes and mtime are fixed, so the same binary and
// mtime always give the same bytes.
func RootFS(binary []byte, mtime time.Time) ([]byte, error) {
	es := entries(binary)
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.path, b.path) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		hdr := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime.UTC().Truncate(time.Second),
			// USTAR carries no access or change times, so nothing of the build machine
			// leaks into the layer.
			Format: tar.FormatUSTAR,
		}
		if e.isDir() {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
