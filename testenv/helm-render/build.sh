#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds helm-render (test tooling) offline with Debian's Go in GOPATH mode: sprig v3, yaml.v3 and
# gojsonschema (values.schema.json, as Helm validates it) come from Debian's golang-*-dev packages
# under /usr/share/gocode/src (scripts/install-deps.sh installs them). Usage: build.sh OUT_BINARY
set -euo pipefail
out=${1:?usage: build.sh OUT_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
go=$(command -v go || true)
if [ -z "$go" ]; then
  for g in /usr/lib/go-*/bin/go; do [ -x "$g" ] && go=$g; done
fi
[ -n "$go" ] || { echo "build.sh: no Go toolchain (apt-get install golang-1.19-go)" >&2; exit 1; }
for d in github.com/Masterminds/sprig:golang-github-masterminds-sprig-dev \
  gopkg.in/yaml.v3:golang-gopkg-yaml.v3-dev \
  github.com/xeipuuv/gojsonschema:golang-github-xeipuuv-gojsonschema-dev; do
  [ -d "/usr/share/gocode/src/${d%%:*}" ] || {
    echo "build.sh: /usr/share/gocode/src/${d%%:*} missing (apt-get install ${d#*:}; scripts/install-deps.sh installs it)" >&2
    exit 1
  }
done
# Rebuild only when the source is newer than the binary.
if [ -x "$out" ] && [ "$out" -nt "$here/main.go" ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
cache=${GOCACHE:-$(dirname "$out")/.gocache}
cd "$here"
GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$cache" GOFLAGS= "$go" build -o "$out" .
