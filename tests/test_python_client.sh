#!/bin/sh
# test_python_client.sh — the rtomo Python package (client/python) against
# the real rtomod: installed into a virtual environment in the build tree
# (with Debian's pyzmq, numpy and pytest through --system-site-packages,
# offline: --no-deps --no-build-isolation), then tests/python run by
# pytest.  Skipped (77) only where python3 itself is missing; a missing
# venv, pip or pytest is a setup error (tools/setup installs them).
set -eu
py=${RTOMO_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
src=$(cd "${top_srcdir:-.}" && pwd)
build=$(cd "${top_builddir:-.}" && pwd)
for m in venv pip pytest zmq numpy setuptools cbor2 lz4; do
  "$py" -c "import $m" 2>/dev/null ||
    { echo "FAIL: $py lacks the module $m (run tools/setup)"; exit 1; }
done
venv=$build/python-venv
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv --system-site-packages "$venv"
fi
# Build from a copy: the source tree may be read-only (distcheck), and
# setuptools writes build/ and *.egg-info beside the sources.
stage=$build/python-stage
rm -rf "$stage"
mkdir -p "$stage"
cp -R "$src/client/python/." "$stage/"
rm -rf "$stage/build" "$stage"/*.egg-info
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation \
  --no-index --disable-pip-version-check --force-reinstall "$stage"
cd "$build"
RTOMOD=${RTOMOD:-$build/rtomod}
export RTOMOD
# the installed package, not the sources: run from the build tree
exec "$venv/bin/python" -m pytest -p no:cacheprovider -v -s -rs \
  "$src/tests/python"
