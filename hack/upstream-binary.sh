#!/usr/bin/env bash
# Builds upstream Stakater Reloader at a pinned release from its source, for the old side of the
# A/B load tests:
#
#   make loadtest-full OLD=$(bash hack/upstream-binary.sh) NEW=bin/reloader
#
# UPSTREAM_VERSION picks the build: v1.4.21 (the default, upstream's current release) or v2
# (upstream's controller-runtime rewrite, its `v2` branch at the commit UPSTREAM_V2_COMMIT pins,
# the peer users compare with next):
#
#   make loadtest-full OLD=$(UPSTREAM_VERSION=v2 bash hack/upstream-binary.sh) NEW=bin/reloader
#
# The program is built from upstream's own source, not copied into this repository, and cached
# in ~/.cache/reloader/upstream-<version>/reloader; a second run prints the cached path at once.
# Prints the binary's path on stdout, everything else on stderr.
#
# Where the source comes from, the first that is set or works:
#   UPSTREAM_SRC   a directory holding upstream's source at that release (go.mod and main.go)
#   UPSTREAM_GIT   a git repository or bare mirror of upstream holding the release's tag
#   otherwise      a shallow clone of $UPSTREAM_URL (https://github.com/stakater/Reloader) at the tag
# With none of them (a machine that cannot reach GitHub), it says so and exits 1.
#
# The Go module proxy serves neither github.com/stakater/Reloader itself here nor, at times, the
# pseudo-version of github.com/openshift/api that upstream's go.mod pins; when that module
# cannot be downloaded, the build replaces it with UPSTREAM_OPENSHIFT_API (a later pseudo-version
# of the same API types) and says so.
set -euo pipefail

UPSTREAM_VERSION=${UPSTREAM_VERSION:-v1.4.21}
# The v2 branch moves: the commit built is pinned, so two runs compare the same program.
UPSTREAM_V2_COMMIT=${UPSTREAM_V2_COMMIT:-7a94f29a7142646cf49f5d13c0a024ba5e429572}
case $UPSTREAM_VERSION in
v1.4.21)
	ref=$UPSTREAM_VERSION main=. versionpkg=github.com/stakater/Reloader/pkg/common
	cachename=$UPSTREAM_VERSION
	;;
v2)
	ref=$UPSTREAM_V2_COMMIT main=./cmd/reloader versionpkg=github.com/stakater/Reloader/internal/pkg/metadata
	cachename=v2-${UPSTREAM_V2_COMMIT:0:12}
	;;
*)
	echo "upstream-binary: UPSTREAM_VERSION=$UPSTREAM_VERSION: v1.4.21 or v2" >&2
	exit 1
	;;
esac
UPSTREAM_URL=${UPSTREAM_URL:-https://github.com/stakater/Reloader}
UPSTREAM_OPENSHIFT_API=${UPSTREAM_OPENSHIFT_API:-github.com/openshift/api@v0.0.0-20260326111139-30c2ef7a272e}

log() { echo "upstream-binary: $*" >&2; }

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}
dir=$cache_root/reloader/upstream-$cachename
bin=$dir/reloader
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

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$work/src
commit=unknown
if [[ -n "${UPSTREAM_SRC:-}" ]]; then
	[[ -f "$UPSTREAM_SRC/go.mod" && -f "$UPSTREAM_SRC/$main/main.go" ]] ||
		{ log "UPSTREAM_SRC=$UPSTREAM_SRC holds no go.mod and $main/main.go"; exit 1; }
	grep -q '^module github.com/stakater/Reloader$' "$UPSTREAM_SRC/go.mod" ||
		{ log "UPSTREAM_SRC=$UPSTREAM_SRC is not github.com/stakater/Reloader"; exit 1; }
	cp -r "$UPSTREAM_SRC" "$src"
	if [[ $UPSTREAM_VERSION != v2 && -f "$src/VERSION" && "$(tr -d ' \n' <"$src/VERSION")" != "${UPSTREAM_VERSION#v}" ]]; then
		log "warning: UPSTREAM_SRC's VERSION file says $(tr -d ' \n' <"$src/VERSION"), not ${UPSTREAM_VERSION#v}"
	fi
	log "building upstream $UPSTREAM_VERSION from $UPSTREAM_SRC"
elif [[ -n "${UPSTREAM_GIT:-}" ]]; then
	commit=$(git --git-dir="$UPSTREAM_GIT" rev-parse --verify -q "$ref^{commit}" 2>/dev/null ||
		git -C "$UPSTREAM_GIT" rev-parse --verify -q "$ref^{commit}" 2>/dev/null) ||
		{ log "UPSTREAM_GIT=$UPSTREAM_GIT has no $ref"; exit 1; }
	mkdir -p "$src"
	git --git-dir="$(git -C "$UPSTREAM_GIT" rev-parse --absolute-git-dir 2>/dev/null || echo "$UPSTREAM_GIT")" \
		archive "$commit" | tar -x -C "$src"
	log "building upstream $UPSTREAM_VERSION ($commit) from $UPSTREAM_GIT"
elif [[ $UPSTREAM_VERSION == v1.4.21 ]] && GIT_TERMINAL_PROMPT=0 timeout 120 git clone -q --depth=1 --branch "$ref" "$UPSTREAM_URL" "$src" >&2; then
	commit=$(git -C "$src" rev-parse HEAD)
	rm -rf "$src/.git"
elif [[ $UPSTREAM_VERSION == v2 ]] && GIT_TERMINAL_PROMPT=0 timeout 300 git clone -q --branch v2 "$UPSTREAM_URL" "$src" >&2 &&
	git -C "$src" checkout -q "$ref"; then
	commit=$ref
	rm -rf "$src/.git"
	log "building upstream $UPSTREAM_VERSION ($commit) from $UPSTREAM_URL"
else
	log "no source of upstream Reloader $UPSTREAM_VERSION: $UPSTREAM_URL cannot be cloned from here."
	log "Set UPSTREAM_GIT to a clone or bare mirror of it (with $ref), or"
	log "UPSTREAM_SRC to a directory holding its source at that tag, and run this again."
	exit 1
fi

cd "$src"
# The build settles go.sum itself (-mod=mod); GOFLAGS from the caller (-buildvcs=false and the
# like) are kept.
export GOWORK=off CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
openshift_api=$(awk '$1 == "github.com/openshift/api" && $2 ~ /^v/ { print $1 "@" $2; exit }' go.mod)
if [[ -n "$openshift_api" ]] && ! go mod download "$openshift_api" >/dev/null 2>&1; then
	log "$openshift_api cannot be downloaded; replacing it with $UPSTREAM_OPENSHIFT_API"
	go mod edit -replace "github.com/openshift/api=$UPSTREAM_OPENSHIFT_API"
fi
go build -trimpath -ldflags="-X $versionpkg.Version=$UPSTREAM_VERSION -X $versionpkg.Commit=$commit" -o "$work/reloader" "$main" >&2
mv "$work/reloader" "$bin"
log "built $bin"
echo "$bin"
