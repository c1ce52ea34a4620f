#!/usr/bin/env bash
# Builds the Kubernetes control plane the kubeexec integration tests run against:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, all from the
# Go module proxy, into a cache folder outside the checkout keyed by their versions.
# Only missing binaries are built; a cold build takes about 20 minutes on 2 cores,
# a warm one a second. Says where they are on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KUBE=v1.37.2 ETCD=v3.6.16 KWOK=v0.8.0
bin=${QUOTASHARE_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/quotashare/k8s-$KUBE-etcd-$ETCD-kwok-$KWOK}
mkdir -p "$bin"
build() { # name, module dir, package, extra flags...
	local name=$1 dir=$2 pkg=$3; shift 3
	[ -x "$bin/$name" ] && return 0
	echo "building $name (cached in $bin)" >&2
	(cd "$here/$dir" && go build -trimpath "$@" -o "$bin/$name.tmp" "$pkg") && mv "$bin/$name.tmp" "$bin/$name"
}
ver="-X k8s.io/component-base/version.gitVersion=$KUBE -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver -ldflags "$ver"
build kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler -ldflags "$ver"
build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager -ldflags "$ver"
if [ ! -x "$bin/kwok" ]; then
	echo "building kwok (cached in $bin)" >&2
	GOBIN="$bin/.kwok" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK" && mv "$bin/.kwok/kwok" "$bin/kwok"
fi
echo "Kubernetes test binaries in $bin" >&2
