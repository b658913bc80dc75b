package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CABundle returns the Mozilla NSS roots, as PEM, from golang.org/x/crypto/x509roots/fallback
// at the version pinned in go.mod: every machine builds the same bytes, and upgrading the
// roots is a reviewed go.mod change. Roots that NSS trusts only with extra constraints (such
// as "distrusted after" dates) are left out, since a PEM file can't carry the constraint and
// a reader would trust them without it.
func CABundle() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		// Encoding to a bytes.Buffer can't fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}
