#!/usr/bin/env bash
# Runs upstream Stakater Reloader's own e2e Ginkgo suites (test/e2e/{core,annotations,flags,
# advanced}; csi/argo/openshift labels skipped) against this repository's reloader build,
# on the local Docker-free control plane (bin/localcluster, kwok fake nodes).
#
# How: upstream's tree is extracted to $UP; its chart path is pointed (symlink) at our chart,
# so the suites `helm upgrade --install` OUR chart for real. Pods of kwok nodes run nothing,
# so test/e2e/utils/helm.go is patched (patch.py; specs untouched) to also start
# bin/reloader as a local process with the container args/env our chart rendered into the
# Deployment (localproc.go.txt), and to stop it on uninstall.
#
# Usage: hack/upstream-e2e/run.sh [suite ...]   (default: advanced annotations flags core)
# Env: KUBECONFIG (reuse a running cluster), FOCUS (ginkgo focus regexp), GINKGO_ARGS (more
#      -ginkgo.* flags, no spaces), TAG (suffix of log/junit names in $OUT),
#      RELOADER_EXTRA_SET="k=v,..." (extra helm --set for every install, e.g.
#      reloader.runCronJobsOnReload=true).
# Needs: helm v3 on PATH (or hack's cached ~/.cache/reloader/tools/helm-*), kubectl, curl,
#        upstream's mirror at $UPSTREAM_GIT (bare git dir).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
UPSTREAM_GIT=${UPSTREAM_GIT:-/work/.mirror/stakater+Reloader/repo}
UP=${UP:-/tmp/upstream}
OUT=${OUT:-/tmp/ue2e}
mkdir -p "$OUT"

if [[ -z "$(command -v helm || true)" ]]; then
	h=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/reloader/tools/helm-v3*/ 2>/dev/null | tail -1)
	[[ -n "$h" ]] && export PATH="$h:$PATH"
fi
command -v helm >/dev/null && command -v kubectl >/dev/null

# 1. our build
(cd "$root" && make build >/dev/null)
export RELOADER_BIN="$root/bin/reloader"

# 2. upstream tree, patched utils, chart symlink
if [[ ! -f "$UP/.prepared" ]]; then
	rm -rf "$UP" && mkdir -p "$UP"
	git --git-dir="$UPSTREAM_GIT" archive HEAD | tar -x -C "$UP"
	python3 "$here/patch.py" "$UP/test/e2e/utils/helm.go"
	cp "$here/localproc.go.txt" "$UP/test/e2e/utils/zz_localproc.go"
	# a copy of OUR chart at upstream's chart path (kubeVersion and all: the API server built by
	# hack/kube-binaries.sh reports its real version)
	rm -rf "$UP/deployments/kubernetes/chart/reloader"
	cp -r "$root/deployments/chart/reloader" "$UP/deployments/kubernetes/chart/reloader"
	# upstream's pinned openshift/api pseudo-version is not served by proxy.golang.org (403);
	# use the one openshift/client-go (same pin) requires. Only openshift-labelled specs use it.
	(cd "$UP" && go mod edit -replace github.com/openshift/api=github.com/openshift/api@v0.0.0-20260326111139-30c2ef7a272e)
	touch "$UP/.prepared"
fi

# 3. control plane (unless KUBECONFIG is given)
if [[ -z "${KUBECONFIG:-}" ]]; then
	bindir=$(bash "$root/hack/kube-binaries.sh")
	RELOADER_KUBE_BIN_DIR="$bindir" setsid "$root/bin/localcluster" --kubeconfig-out "$OUT/kubeconfig" >"$OUT/cluster.log" 2>&1 &
	cpid=$!
	trap 'kill -TERM -- -$cpid 2>/dev/null || true' EXIT
	for _ in $(seq 120); do grep -q "control plane running" "$OUT/cluster.log" 2>/dev/null && break; sleep 1; done
	export KUBECONFIG="$OUT/kubeconfig"
fi

# 4. suites, one at a time
export RELOADER_LOG_DIR="$OUT" GOFLAGS=-mod=mod
suites=("$@"); [[ ${#suites[@]} -gt 0 ]] || suites=(advanced annotations flags core)
for s in "${suites[@]}"; do
	echo "=== suite $s"
	(cd "$UP" && go test "./test/e2e/$s/" -count=1 -timeout 60m -v \
		-ginkgo.v -ginkgo.label-filter='!csi && !argo && !openshift' \
		-ginkgo.junit-report="$OUT/junit-$s${TAG:-}.xml" ${FOCUS:+"-ginkgo.focus=$FOCUS"} ${GINKGO_ARGS:-}) >"$OUT/suite-$s${TAG:-}.log" 2>&1 || true
	grep -E "^(Ran|PASS|FAIL|ok|---)|Passed.*Failed" "$OUT/suite-$s${TAG:-}.log" | tail -5
done
