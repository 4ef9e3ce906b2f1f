#!/usr/bin/env bash
# Install Postgres and pgvector from Debian's packages for tests/publish (run as root; .ci/run calls it).
#
# Debian ships pgvector as postgresql-NN-pgvector for the release's Postgres major NN. Where the
# release has no such binary package (bookworm: pgvector entered Debian after it), this builds
# Debian's pgvector *source* package from the next release against postgresql-server-dev-NN
# (a C extension, about 10 s on 2 cores). The archive is the one this machine's apt sources name.
# KB_RAY_PGVECTOR_FROM_SOURCE=1 takes that path even where the package exists (to test it).
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "install_postgres.sh: not root; skipping (tests/publish skip without Postgres + pgvector)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
installed=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
if [ -n "$installed" ] && [ -x "/usr/lib/postgresql/$installed/bin/postgres" ] \
        && [ -f "/usr/share/postgresql/$installed/extension/vector.control" ] && [ -z "${KB_RAY_PGVECTOR_FROM_SOURCE:-}" ]; then
    echo "Postgres $installed with pgvector: already installed (no apt-get update)"
    exit 0
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
major=$(ls /usr/lib/postgresql | sort -n | tail -1)
if [ -f "/usr/share/postgresql/$major/extension/vector.control" ] && [ -z "${KB_RAY_PGVECTOR_FROM_SOURCE:-}" ]; then
    echo "Postgres $major with pgvector: already installed"
    exit 0
fi
if [ -z "${KB_RAY_PGVECTOR_FROM_SOURCE:-}" ] && apt-get install -y -qq "postgresql-$major-pgvector" >/dev/null 2>&1; then
    echo "Postgres $major with pgvector from postgresql-$major-pgvector"
    exit 0
fi

echo "no postgresql-$major-pgvector package: building Debian's pgvector source package"
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
# the archive of the entry that serves this release (deb822 .sources, else a one-line sources.list)
archive=$(awk -v suite="$codename" '/^URIs:/ {uri = $2} /^Suites:/ && $0 ~ (" " suite "( |$)") {print uri; exit}' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$archive" ]; then
    archive=$(awk -v suite="$codename" '$1 == "deb" && $3 == suite {print $2; exit}' /etc/apt/sources.list \
        2>/dev/null || true)
fi
case "$codename" in
    bookworm) source_suite=trixie ;;
    *) source_suite=$codename ;;
esac
cat > /etc/apt/sources.list.d/kb-ray-pgvector-src.sources <<SOURCES
Types: deb-src
URIs: $archive
Suites: $source_suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
apt-get update -qq
apt-get install -y -qq "postgresql-server-dev-$major" dpkg-dev make gcc >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -qq --download-only pgvector >/dev/null 2>&1)
tar -xzf "$work"/pgvector_*.orig.tar.gz -C "$work"
cd "$work"/pgvector-*/
make -s -j2 PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" OPTFLAGS="" >/dev/null
make -s install PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" >/dev/null
test -f "/usr/share/postgresql/$major/extension/vector.control"
echo "Postgres $major with pgvector $(basename "$PWD") built from Debian's source package"
