#!/usr/bin/env bash
# Build a PySpark environment with Apache Iceberg's own Spark runtime, the reference
# reader/writer that the Java interop tests (tests/java_iceberg.py) and bench/ compare
# icecommit against.
#   usage: scripts/java_iceberg/setup.sh DIR [--spark 3.5|4.1] [--with-rest] [--update-checksums]
#   --spark 3.5 (the default): pyspark 3.5.9 and iceberg-spark-runtime-3.5_2.12 1.10.2;
#   --spark 4.1: pyspark 4.1.4 and iceberg-spark-runtime-4.1_2.13 1.12.0 (Spark 4.1 is the
#     newest Spark line an Iceberg release serves);
#   --with-rest: Iceberg's own REST catalog server too (RESTCatalogServer of iceberg-open-api
#     1.11.0's test fixtures, iceberg-core's test jar, Jetty 12.1), in DIR/iceberg-rest, which
#     tests/rest/server.py starts when ICECOMMIT_REST_SERVER=iceberg;
#   --with-sqlite-jdbc: accepted for old command lines; the JDBC drivers always come now.
#   --update-checksums: write jars.sha256 beside this file from what Maven resolved (after
#     changing a version in the poms), instead of checking against it.
# What it makes:
#   DIR/venv/bin/python  the interpreter (pyspark of the chosen line, pandas, pyarrow)
#   DIR/jars/*.jar       Iceberg's Spark runtime, for spark.jars (Jackson and HttpClient 5 are
#                        shaded inside it: no shim is needed)
#   DIR/jdbc/*.jar       the PostgreSQL and SQLite JDBC drivers (Java's JdbcCatalog)
#   DIR/iceberg-rest/    with --with-rest: Iceberg's REST catalog server's classpath
#   DIR/m2/              the Maven repository they were resolved into
#   DIR/spark            the Spark line; DIR/ready marks a finished build (a second run with
#                        DIR ready only adds what the options ask for and checks the jars)
# The jars come from Maven Central at the versions pinned in the poms beside this file
# (pom.xml and its modules spark-3.5, spark-4.1, jdbc, rest-server), resolved with `mvn
# dependency:copy-dependencies` into DIR/m2. Once DIR/m2 holds a module (a DIR/m2/.resolved-* file
# names the poms' digest and the module), later runs resolve offline (-o). Every jar is checked against
# jars.sha256 beside this file, and a jar whose SHA-256 differs, or that is not listed,
# fails the build naming it. About 900 MB (Spark 3.5) or 1 GB (Spark 4.1), the Maven repository
# included; 40 to 50 s the first time (most of it pip), 2 s after that.
set -euo pipefail
D=${1:?usage: setup.sh DIR [--spark 3.5|4.1] [--with-rest] [--update-checksums]}
HERE=$(cd "$(dirname "$0")" && pwd)
CHECKSUMS="$HERE/jars.sha256"
python="${PYTHON:-python3}"
spark=3.5 with_rest=0 update=0
set -- "${@:2}"
while [ "$#" -gt 0 ]; do
  case "$1" in
    --spark) spark=${2:?--spark needs a line: 3.5 or 4.1}; shift ;;
    --spark=*) spark=${1#--spark=} ;;
    --with-rest) with_rest=1 ;;
    --with-sqlite-jdbc) ;;
    --update-checksums) update=1 ;;
    *) echo "java-iceberg setup: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$spark" in
  3.5) pyspark="pyspark==3.5.9" ;;
  4.1) pyspark="pyspark==4.1.4" ;;
  *) echo "java-iceberg setup: --spark $spark: the lines built here are 3.5 and 4.1" >&2; exit 2 ;;
esac
mkdir -p "$D"
D=$(cd "$D" && pwd)
if [ -f "$D/spark" ] && [ "$(cat "$D/spark")" != "$spark" ]; then
  echo "java-iceberg setup: $D was built for Spark $(cat "$D/spark"), not $spark: use another DIR" >&2
  exit 2
fi

modules="spark-$spark,jdbc"
[ "$with_rest" = 1 ] && modules="$modules,rest-server"
[ "$with_rest" = 0 ] && [ -d "$D/iceberg-rest" ] && modules="$modules,rest-server"  # keep what is there

# Maven: online until DIR/m2 has resolved each module of these poms once, offline after that
digest=$(cat "$HERE"/pom.xml "$HERE"/*/pom.xml | sha256sum | cut -c1-16)
offline=(-o)
for module in ${modules//,/ }; do
  [ -f "$D/m2/.resolved-$digest-$module" ] || offline=()
done
rm -rf "$D/jars" "$D/jdbc" "$D/iceberg-rest"
if ! (cd "$HERE" && mvn -B -q "${offline[@]}" --strict-checksums -Dmaven.repo.local="$D/m2" -Djava-iceberg.dir="$D" \
  -pl "$modules" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies) >"$D/maven.log" 2>&1; then
  tail -40 "$D/maven.log" >&2
  echo "java-iceberg setup: Maven failed to resolve $modules (all of it in $D/maven.log)" >&2
  exit 1
fi
for module in ${modules//,/ }; do
  touch "$D/m2/.resolved-$digest-$module"
done

if [ "$update" = 1 ]; then
  "$python" "$HERE/checksums.py" update "$CHECKSUMS" "$D/jars" "$D/jdbc" "$D/iceberg-rest"
elif ! "$python" "$HERE/checksums.py" check "$CHECKSUMS" "$D/jars" "$D/jdbc" "$D/iceberg-rest"; then
  rm -rf "$D/jars" "$D/jdbc" "$D/iceberg-rest"  # no test runs on a jar that failed its check
  exit 1
fi
echo "$spark" >"$D/spark"

if [ ! -f "$D/ready" ]; then
  [ -x "$D/venv/bin/python" ] || "$python" -m venv "$D/venv"
  # pip's failures fail the script; only a local mirror's "is ignored" notices are dropped
  quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
  quiet "$D/venv/bin/python" -m pip install -q "$pyspark" "pandas<3" pyarrow
  touch "$D/ready"
fi
echo "java-iceberg: ready (Spark $spark): $D/venv/bin/python with spark.jars=$(ls "$D"/jars/*.jar | paste -sd, -)" >&2
