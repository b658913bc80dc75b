#!/usr/bin/env bash
# Installs a Go command at a pinned version, once, into a versioned cache directory, and
# prints the path of the binary on stdout: the release tooling (actionlint, crane, helm,
# cyclonedx-gomod, oras) needs nothing on a fresh machine but Go.
#
#   hack/tool.sh actionlint   ->  ~/.cache/reloader/tools/actionlint-v1.7.12/actionlint
set -euo pipefail

name=${1:?usage: hack/tool.sh <actionlint|crane|cyclonedx-gomod|helm|oras>}
# crane and helm at the versions deployments/go.mod already pins for the image builder and
# the chart tests, so the CLI the workflow pushes with is the library the tests ran.
deps_mod=$(dirname "$0")/../deployments/go.mod
mod_version() { awk -v m="$1" '$1 == m { print $2; exit }' "$deps_mod"; }
case $name in
actionlint) pkg=github.com/rhysd/actionlint/cmd/actionlint version=v1.7.12 ;;
cyclonedx-gomod) pkg=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod version=v1.10.0 ;;
crane) pkg=github.com/google/go-containerregistry/cmd/crane version=$(mod_version github.com/google/go-containerregistry) ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=$(mod_version helm.sh/helm/v3) ;;
oras) pkg=oras.land/oras/cmd/oras version=v1.3.0 ;;
*)
	echo "hack/tool.sh: unknown tool $name" >&2
	exit 2
	;;
esac
if [[ -z $version ]]; then
	echo "hack/tool.sh: no version of $name in $deps_mod" >&2
	exit 1
fi

dir=${XDG_CACHE_HOME:-$HOME/.cache}/reloader/tools/$name-$version
bin=$dir/$name
if [[ ! -x $bin ]]; then
	mkdir -p "$dir"
	# Two tests may ask at once: one installs, the other waits for it.
	exec 9>"$dir.lock"
	flock 9
	if [[ ! -x $bin ]]; then
		echo "hack/tool.sh: installing $pkg@$version" >&2
		GOBIN=$dir GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 go install "$pkg@$version"
	fi
fi
echo "$bin"
