#!/usr/bin/env bash
# Builds upstream Stakater Reloader at a pinned version from the Go module proxy, for the old
# side of the A/B load tests (`make loadtest-full OLD=$(bash hack/upstream-reloader.sh)`). The
# program is built from its published module, not copied into this repository, and cached in a
# versioned directory; a second run is a no-op. Prints the binary's path on stdout.
set -euo pipefail

UPSTREAM_VERSION=${UPSTREAM_VERSION:-v1.4.21}

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}
dir=$cache_root/reloader/upstream-$UPSTREAM_VERSION
bin=$dir/Reloader
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
echo "upstream-reloader: building github.com/stakater/Reloader@$UPSTREAM_VERSION" >&2
GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 GOBIN="$dir" \
	go install "github.com/stakater/Reloader@$UPSTREAM_VERSION" >&2
[[ -x "$bin" ]] || { echo "upstream-reloader: no binary at $bin" >&2; exit 1; }
echo "$bin"
