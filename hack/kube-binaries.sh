#!/usr/bin/env bash
# Builds, at pinned versions, the control-plane binaries that tests, the demo and the load
# tests run: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok. Nothing
# prebuilt can be downloaded here, so everything is compiled from Go modules and cached in a
# versioned directory; a second run is a no-op. Prints the directory on stdout.
set -euo pipefail

K8S_VERSION=v1.37.0
STAGING_VERSION=v0.37.0
ETCD_VERSION=v3.6.7
KWOK_VERSION=v0.8.0

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}
# "-stamped": the Kubernetes binaries carry their version (see the ldflags below); a cache
# built before they did is not reused.
dir=${RELOADER_KUBE_BIN_DIR:-$cache_root/reloader/kube-$K8S_VERSION-stamped-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION}
want=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwok-stages.yaml)

complete() {
	for f in "${want[@]}"; do [[ -s "$dir/$f" ]] || return 1; done
}
if complete; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
# Two test processes may ask at once (make test, then the deployments module): one builds,
# the other waits for it instead of compiling the same binaries beside it.
exec 9>"$dir.lock"
flock 9
if complete; then
	echo "$dir"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
log() { echo "kube-binaries: $*" >&2; }

if [[ ! -s "$dir/etcd" ]]; then
	log "building etcd $ETCD_VERSION"
	mkdir -p "$work/etcd" && cd "$work/etcd"
	go mod init etcd-build >/dev/null 2>&1
	go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
	go build -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
	mv "$dir/etcd.tmp" "$dir/etcd"
fi

if [[ ! -s "$dir/kube-apiserver" || ! -s "$dir/kube-controller-manager" || ! -s "$dir/kube-scheduler" ]]; then
	log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION (several minutes cold)"
	mkdir -p "$work/k8s" && cd "$work/k8s"
	go mod init k8s-build >/dev/null 2>&1
	gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	# k8s.io/kubernetes replaces its staging modules with local paths; pin each to its release.
	staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod")
	{
		echo "require k8s.io/kubernetes $K8S_VERSION"
		for m in $staging; do
			echo "require $m $STAGING_VERSION"
			echo "replace $m => $m $STAGING_VERSION"
		done
	} >>go.mod
	# Stamp the version as the Kubernetes build does (hack/lib/version.sh there): without it the
	# API server reports v0.0.0-master+$Format:%H$, and a chart's kubeVersion constraint (ours
	# says >=1.25.0-0) refuses a real `helm install` into this cluster.
	major=${K8S_VERSION#v}; major=${major%%.*}
	minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
	ldflags=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	for b in kube-apiserver kube-controller-manager kube-scheduler; do
		go build -ldflags "$ldflags" -o "$dir/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
		mv "$dir/$b.tmp" "$dir/$b"
	done
fi

if [[ ! -s "$dir/kwok" ]]; then
	log "building kwok $KWOK_VERSION"
	GOBIN="$work/bin" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
	mv "$work/bin/kwok" "$dir/kwok"
fi

if [[ ! -s "$dir/kwok-stages.yaml" ]]; then
	src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
	[[ -d "$src" ]] || (cd "$work" && go mod download "sigs.k8s.io/kwok@$KWOK_VERSION" >&2)
	first=1
	for f in "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat/*.yaml "$src"/pod/fast/pod-*.yaml; do
		[[ $first == 1 ]] || echo "---"
		first=0
		cat "$f"
	done >"$dir/kwok-stages.yaml.tmp"
	mv "$dir/kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"
fi

complete || { log "incomplete build in $dir"; exit 1; }
echo "$dir"
