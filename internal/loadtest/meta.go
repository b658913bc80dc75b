package loadtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// describe records a binary's --version (its first line; "" when it exits non-zero, as a
// binary without the flag does) and its SHA-256.
func describe(bin string) BuildInfo {
	var b BuildInfo
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		b.Version = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	if f, err := os.Open(bin); err == nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			b.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		f.Close()
	}
	return b
}
