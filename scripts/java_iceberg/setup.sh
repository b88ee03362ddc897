#!/usr/bin/env bash
# Build a PySpark 3.5 environment with Apache Iceberg's own Spark runtime (1.10.2), the
# reference reader/writer that tests/lifecycle/test_java_reads_compacted.py and
# bench/compaction.py compare icecommit against.
#   usage: scripts/java_iceberg/setup.sh DIR [--with-sqlite-jdbc] [--with-rest]
#   DIR/venv/bin/python is the interpreter; DIR/jars/*.jar go in spark.jars; DIR/ready marks
#   a finished build (a second run with DIR ready returns at once).
#   --with-sqlite-jdbc also installs Debian's libxerial-sqlite-jdbc-java when it is missing:
#   Java's JdbcCatalog on pyiceberg's SQLite catalog, which bench/compaction.py's Spark
#   rewrite_data_files uses (the test reads the table's metadata file and needs no catalog).
#   --with-rest also installs what the REST catalog tests need (tests/rest): Debian's PostgreSQL
#   JDBC driver (the test server's JdbcCatalog) and HttpClient 5 (Iceberg's REST client, which
#   the wheel strips like Jackson): relocated into DIR/jars/iceberg-httpclient-shim.jar with the
#   two classes of httpclient_compat/ in place of 5.2's (the client calls a 5.4 method). Run on a
#   DIR already built, it adds only that.
# Vendored from the team's shared tools (shared/tools/java-iceberg/setup.sh) so that CI can
# build it from a clean clone; adjusted: strict shell options, pinned wheels, checks that the
# jars are there, the downloaded wheels removed after use, and a "ready" marker written last.
# Iceberg's runtime jar comes from the PyPI wheel snowpark-connect-deps-iceberg, which strips
# the Jackson classes the jar expects at org.apache.iceberg.shaded.com.fasterxml.jackson; this
# script takes Jackson 2.18.8 from snowpark-connect-deps-2 and relocates it there
# (relocate_jackson.py beside this file). About 750 MB, about a minute.
set -euo pipefail
D=${1:?usage: setup.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
python="${PYTHON:-python3}"
with_sqlite=0 with_rest=0
for option in "${@:2}"; do
  case "$option" in
    --with-sqlite-jdbc) with_sqlite=1 ;;
    --with-rest) with_rest=1 ;;
    *) echo "java-iceberg setup: unknown option $option" >&2; exit 2 ;;
  esac
done
debian=()
[ "$with_sqlite" = 1 ] && [ ! -f /usr/share/java/sqlite-jdbc.jar ] && debian+=(libxerial-sqlite-jdbc-java)
if [ "$with_rest" = 1 ]; then
  [ -f /usr/share/java/postgresql.jar ] || debian+=(libpostgresql-jdbc-java)
  [ -f /usr/share/java/httpclient5.jar ] || debian+=(libhttpclient5-java)
  [ -f /usr/share/java/httpcore5-h2.jar ] || debian+=(libhttpcore5-java)
fi
if [ "${#debian[@]}" -gt 0 ]; then
  echo "java-iceberg setup: installing Debian's ${debian[*]}" >&2
  if [ "$(id -u)" = 0 ]; then apt_get="apt-get"; else apt_get="sudo apt-get"; fi
  ($apt_get update -qq && $apt_get install -y -qq "${debian[@]}") >&2
fi

rest_client() {  # Iceberg's REST client's HttpClient 5, relocated, with the compat classes
  local out="$D/jars/iceberg-httpclient-shim.jar" build="$D/httpclient-build"
  [ -f "$out" ] && return 0
  rm -rf "$build" && mkdir -p "$build/classes"
  "$python" "$HERE/relocate_jackson.py" --package org.apache.hc "$build/relocated.jar" \
    /usr/share/java/httpclient5.jar /usr/share/java/httpcore5.jar /usr/share/java/httpcore5-h2.jar >/dev/null
  javac -nowarn -d "$build/classes" \
    -cp "$build/relocated.jar:$D/jars/*:$(ls -d "$D"/venv/lib/python3*/site-packages/pyspark/jars)/*" \
    "$HERE"/httpclient_compat/*.java
  "$python" - "$build/relocated.jar" "$build/classes" "$out.tmp" <<'PY'
import os, sys, zipfile
source, classes, out = sys.argv[1:]
mine = {os.path.relpath(os.path.join(d, f), classes): os.path.join(d, f) for d, _, fs in os.walk(classes) for f in fs}
with zipfile.ZipFile(source) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
    for name in z.namelist():
        if name not in mine:
            dst.writestr(name, z.read(name))
    for name, path in sorted(mine.items()):
        dst.write(path, name)
PY
  mv "$out.tmp" "$out"
  rm -rf "$build"
}

if [ -f "$D/ready" ]; then
  [ "$with_rest" = 1 ] && rest_client
  exit 0
fi
mkdir -p "$D"
D=$(cd "$D" && pwd)
rm -rf "$D/dl" "$D/jars"
mkdir -p "$D/dl" "$D/jars"
[ -x "$D/venv/bin/python" ] || "$python" -m venv "$D/venv"
# pip's failures fail the script; only a local mirror's "is ignored" notices are dropped
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
quiet "$D/venv/bin/python" -m pip install -q "pyspark==3.5.9" "pandas<3" pyarrow
quiet "$D/venv/bin/python" -m pip download -q --no-deps -d "$D/dl" \
  "snowpark-connect-deps-iceberg==1.0.3" "snowpark-connect-deps-2==3.56.7"
"$python" - "$D" <<'PY'
import glob, os, sys, zipfile
d = sys.argv[1]
for w in glob.glob(os.path.join(d, "dl", "*.whl")):
    z = zipfile.ZipFile(w)
    for n in z.namelist():
        b = os.path.basename(n)
        if b == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" or (
            b.startswith("jackson-") and "2.18.8" in b and b.split("-")[1] in ("annotations", "core", "databind")):
            open(os.path.join(d, "jars", b), "wb").write(z.read(n))
PY
for jar in iceberg-spark-runtime-3.5_2.12-1.10.2.jar jackson-annotations-2.18.8.jar \
  jackson-core-2.18.8.jar jackson-databind-2.18.8.jar; do
  [ -f "$D/jars/$jar" ] || { echo "java-iceberg setup: $jar not found in the downloaded wheels" >&2; exit 1; }
done
JSR=$(ls "$D"/venv/lib/python3*/site-packages/pyspark/jars/jackson-datatype-jsr310-*.jar)
"$python" "$HERE/relocate_jackson.py" "$D/jars/iceberg-jackson-shim.jar" \
  "$D"/jars/jackson-annotations-2.18.8.jar "$D"/jars/jackson-core-2.18.8.jar "$D"/jars/jackson-databind-2.18.8.jar "$JSR" >/dev/null
rm -f "$D"/jars/jackson-annotations-2.18.8.jar "$D"/jars/jackson-core-2.18.8.jar "$D"/jars/jackson-databind-2.18.8.jar
rm -rf "$D/dl"
[ "$with_rest" = 1 ] && rest_client
touch "$D/ready"
echo "java-iceberg: ready: $D/venv/bin/python with spark.jars=$(ls "$D"/jars/*.jar | paste -sd, -)"
