#!/usr/bin/env bash
# build.sh: build the Kubernetes binaries the test cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl) at
# K8S_VERSION into $BATCHTUNE_K8S_CACHE/<version>/bin, from the Go module proxy.
# Reuses binaries already there; a cold build takes ~7.5 min on 2 cores.
#
# k8s.io/kubernetes replaces its staging modules with local paths, so
# `go install k8s.io/kubernetes/cmd/...@v` does not work: a wrapper module
# requires k8s.io/kubernetes and replaces every staging module (read from
# Kubernetes' own go.mod) with its published v0.x.y release.
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH

version=${K8S_VERSION:-v1.34.4}
cache=${BATCHTUNE_K8S_CACHE:-/var/cache/batchtune-k8s}
bindir=$cache/$version/bin
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

have=1
for c in "${cmds[@]}"; do [ -x "$bindir/$c" ] || have=0; done
if [ $have = 1 ]; then echo "$bindir"; exit 0; fi

src=$cache/$version/src
mkdir -p "$src" "$bindir"
staging="v0.${version#v1.}"
gomod=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module batchtune.local/k8sbuild"
  echo
  echo "go 1.24.0"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  grep -E '=> \./staging/src/' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
} >"$src/go.mod"
{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  echo "import ("
  for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
  echo ")"
} >"$src/tools.go"
n=$(grep -c '^replace ' "$src/go.mod")
echo "build.sh: wrapper module with $n replaces in $src" >&2
cd "$src"
GOFLAGS=-mod=mod go mod tidy >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
for c in "${cmds[@]}"; do
  [ -x "$bindir/$c" ] && continue
  start=$(date +%s)
  CGO_ENABLED=0 nice go build -mod=mod -trimpath -ldflags "$ldflags" -o "$bindir/$c.tmp" "k8s.io/kubernetes/cmd/$c" >&2
  mv "$bindir/$c.tmp" "$bindir/$c"
  echo "build.sh: $c in $(( $(date +%s) - start ))s" >&2
done
echo "$bindir"
