#!/usr/bin/env bash
# Builds the Kubernetes control plane the kubeexec integration tests run against:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, all from the
# Go module proxy, into a cache folder outside the checkout keyed by their versions.
# Only missing binaries are built; a cold build takes about 12 minutes on 2 cores
# (with the modules already downloaded), a warm one a second. Says where they are on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KUBE=v1.37.2 ETCD=v3.6.16 KWOK=v0.8.0
bin=${QUOTASHARE_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/quotashare/k8s-$KUBE-etcd-$ETCD-kwok-$KWOK}
mkdir -p "$bin"
build() { # name, module dir, package, extra flags...
	local name=$1 dir=$2 pkg=$3; shift 3
	[ -x "$bin/$name" ] && return 0
	echo "building $name (cached in $bin)" >&2
	# Test binaries: no optimisation, inlining or debug information, which compiles and
	# links in a fraction of the time of a release build.
	(cd "$here/$dir" && go build -trimpath -gcflags=all=-N\ -l "$@" -o "$bin/$name.tmp" "$pkg") && mv "$bin/$name.tmp" "$bin/$name"
}
ver="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
# The three Kubernetes binaries in one go build, so that one links while the next compiles.
if [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/kube-scheduler" ] || [ ! -x "$bin/kube-controller-manager" ]; then
	echo "building kube-apiserver, kube-scheduler, kube-controller-manager (cached in $bin)" >&2
	rm -rf "$bin/.kube" && mkdir -p "$bin/.kube"
	(cd "$here/kube" && go build -trimpath -gcflags=all=-N\ -l -ldflags "$ver" -o "$bin/.kube/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager)
	mv "$bin/.kube/"* "$bin/" && rmdir "$bin/.kube"
fi
if [ ! -x "$bin/kwok" ]; then
	echo "building kwok (cached in $bin)" >&2
	GOBIN="$bin/.kwok" go install -trimpath -gcflags=all=-N\ -l -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK" && mv "$bin/.kwok/kwok" "$bin/kwok"
fi
echo "Kubernetes test binaries in $bin" >&2
