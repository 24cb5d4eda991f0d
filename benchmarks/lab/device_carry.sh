#!/usr/bin/env bash
# Builds the three folders a device call carries (they are git-ignored through .git/info/exclude):
#   .whl  pure-Python needs the H200 image lacks (pydantic, SQLAlchemy, alembic, ...) as cp312 wheels
#   .dev  bubblewrap and the three libraries it links, from this machine's Debian packages
#   .old  the harness before the judge/subject split (61eba0b), for trust_gpu.py's overhead comparison
# Run once per fresh checkout, from the repository root, after `apt-get install bubblewrap`.
set -euo pipefail
cd "$(dirname "$0")/../.."
for d in .whl .dev .old; do
    grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >>.git/info/exclude
done

wheels=(pydantic==2.13.4 pydantic_core==2.46.4 annotated-types typing-inspection SQLAlchemy greenlet PyGithub PyJWT PyNaCl cffi pycparser Deprecated
    alembic Mako platformdirs ruptures more-itertools)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${wheels[@]}"

mkdir -p .dev/real .dev/lib .dev/bin
cp "$(command -v bwrap)" .dev/real/bwrap
for lib in libselinux.so.1 libcap.so.2 libpcre2-8.so.0; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" .dev/lib/
done
cat >.dev/bin/bwrap <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/real/bwrap" "$@"
EOF
chmod +x .dev/bin/bwrap

rm -rf .old && mkdir .old
git archive 61eba0b kernelbot templates rules storage | tar -x -C .old
du -sh .whl .dev .old
