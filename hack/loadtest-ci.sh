#!/usr/bin/env bash
# The steps of the load-test workflow (.github/workflows/loadtest.yaml), runnable locally:
# builds this checkout and the old side, runs the quick or the full set A/B, and leaves the
# reports in $LOADTEST_RESULTS (default loadtest-results). Exits non-zero when a gate fails
# for the new build.
#
#   hack/loadtest-ci.sh quick|full
#
# LOADTEST_OLD      base (default): the build of LOADTEST_BASE_REF (default origin/main);
#                   upstream: upstream's release (hack/upstream-binary.sh: from UPSTREAM_GIT,
#                   UPSTREAM_SRC or a clone from GitHub), or, when it cannot
#                   be built, this build with --coalesce-window=0 standing in for it;
#                   or a path to a binary.
# LOADTEST_SCENARIOS  comma-separated IDs (S1..S17) or all; checked, it may come from a comment.
set -euo pipefail

set_name=${1:?usage: hack/loadtest-ci.sh quick|full}
scenarios=${LOADTEST_SCENARIOS:-}
if [[ -n "$scenarios" && ! "$scenarios" =~ ^(all|[Ss][0-9]{1,2}(,[Ss][0-9]{1,2})*)$ ]]; then
	echo "loadtest-ci: scenarios \"$scenarios\" are not a list such as S1,S7" >&2
	exit 2
fi
case "$set_name" in
quick | full) ;;
check-only) exit 0 ;; # the tests' check of the scenario list
*)
	echo "loadtest-ci: want quick or full, not $set_name" >&2
	exit 2
	;;
esac
log() { echo "loadtest-ci: $*" >&2; }

make build
old_args=${LOADTEST_OLD_ARGS:-}
extra_args=""
old=${LOADTEST_OLD:-base}
case "$old" in
base)
	ref=${LOADTEST_BASE_REF:-origin/main}
	work=$(mktemp -d)
	trap 'git worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
	git worktree add --detach "$work/src" "$ref" >&2
	log "building the old side from $ref ($(git rev-parse --short "$ref"))"
	(cd "$work/src" && go build -o "$work/reloader" ./cmd/reloader)
	old_bin=$work/reloader
	;;
upstream)
	if old_bin=$(bash hack/upstream-binary.sh); then
		log "old side: upstream at $old_bin"
		# Upstream serves /metrics on :9090 and takes no --metrics-addr (the tool finds that
		# in its --help): one scenario at a time.
		extra_args="--parallelism=1"
	else
		log "upstream's release could not be built; this build with --coalesce-window=0 stands in for it"
		old_bin=bin/reloader
		old_args="--coalesce-window=0 --flap-max-changes=0 $old_args"
	fi
	;;
*) old_bin=$old ;;
esac

make "loadtest-$set_name" LOADTEST_OLD="$old_bin" LOADTEST_NEW=bin/reloader LOADTEST_OLD_ARGS="$old_args" \
	LOADTEST_SCENARIOS="$scenarios" LOADTEST_RESULTS="${LOADTEST_RESULTS:-loadtest-results}" \
	LOADTEST_ARGS="$extra_args ${LOADTEST_ARGS:-}"
