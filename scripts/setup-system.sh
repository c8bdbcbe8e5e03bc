#!/usr/bin/env bash
# Install JDK 17, Maven and the Debian Maven packages that fill /usr/share/maven-repo, so that
# the MigrationBench evaluator can build Java projects without Maven Central, and bubblewrap, the
# sandbox every agent command and every evaluation build runs in (docs/migrationbench-agent.md, "Sandbox").
#
# Idempotent: packages already installed are left alone, and `apt-get update` runs only when
# something is missing. Needs root (or sudo). Non-interactive (DEBIAN_FRONTEND=noninteractive).
# Recipe: docs/migrationbench-evaluator.md, section "Offline Maven resolution".
set -euo pipefail

PACKAGES=(
  # the command sandbox: bwrap (bubblewrap), setpriv + prlimit (util-linux)
  bubblewrap
  util-linux
  openjdk-17-jdk-headless
  maven
  # plugins bound by Maven's default lifecycle (clean, resources, compiler, surefire, jar, install)
  libmaven-clean-plugin-java
  libmaven-resources-plugin-java
  libmaven-compiler-plugin-java
  libsurefire-java
  libmaven-jar-plugin-java
  libmaven-install-plugin-java
  libmaven-dependency-plugin-java
  # test libraries: JUnit 4 (+ hamcrest), JUnit 5 (jupiter api/engine/params, vintage engine,
  # platform launcher for surefire's junit-platform provider)
  junit4
  junit5
  libhamcrest-java
  # APIs removed from the JDK after 8, which migrated projects add as dependencies
  libjaxb-api-java
  libjaxb-java  # JAXB runtime (org.glassfish.jaxb:jaxb-runtime) for projects that marshal
  libgeronimo-annotation-1.3-spec-java
  # what real MigrationBench repositories commonly need offline (docs/migrationbench-tasks.md, "Real
  # repositories"): test libraries, and plugins bound by their builds or by `bundle` packaging
  libmockito-java
  testng
  libassertj-core-java
  libjmock2-java
  liblogback-java
  libcglib-java
  libmaven-bundle-plugin-java
  libmaven-javadoc-plugin-java
  libmaven-source-plugin-java
  libmaven-shade-plugin-java
  libmaven-deploy-plugin-java
  libmaven-enforcer-plugin-java
  libbuild-helper-maven-plugin-java
  libmaven-assembly-plugin-java
  libmaven-site-plugin-java
  libmaven-war-plugin-java
  libeasymock-java
  # libraries the java-selected records tried here pin (their versions are relocated offline)
  libgoogle-gson-java
  libjoptsimple-java
  libcommons-math3-java
  libjakarta-validation-api-java
  libgoogle-auto-value-java
  libre2j-java
  libtypesafe-config-java
  libjackson2-databind-java
  libjackson2-dataformat-yaml
  libjetbrains-annotations-java
  liblombok-java
  libxstream-java
  libcommons-httpclient-java
  libprotobuf-java
  libjaxrs-api-java
  libreflections-java
  libmaven-plugin-testing-java
  libtruth-java
  libspring-context-java
  # not maven-antrun-plugin: it runs arbitrary code in a build phase before the evaluator's
  # bytecode snapshot (docs/migrationbench-evaluator.md, "Threat model of the reward")
  # a real browser for the viewer's tests (tests/test_view_browser.py, bench/viewer.py; Playwright
  # drives it, its own browser download is not used)
  chromium
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup-system: all ${#PACKAGES[@]} packages already installed"
else
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO=(sudo); else
      echo "setup-system: need root to install: ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "setup-system: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  APT_OPTS=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y -q \
    --no-install-recommends "${missing[@]}"
fi

# Check: Java 17 is the default and the Debian repo holds what the evaluator relies on.
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if [[ "$java_major" != "17" ]]; then
  echo "setup-system: default java is '$java_major', expected 17 (see update-alternatives --config java)" >&2
  exit 1
fi
for dir in org/apache/maven/plugins/maven-compiler-plugin org/apache/maven/plugins/maven-surefire-plugin \
  junit/junit org/junit/jupiter/junit-jupiter-engine org/junit/vintage/junit-vintage-engine \
  org/junit/platform/junit-platform-launcher javax/xml/bind/jaxb-api; do
  if [[ ! -d /usr/share/maven-repo/$dir ]]; then
    echo "setup-system: /usr/share/maven-repo/$dir missing after install" >&2
    exit 1
  fi
done
# Check: bwrap can build the sandbox here (user namespaces allowed). The full proof, with escape
# attempts checked from the host: `strands-art sandbox-check`.
if ! bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
  --symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /bin/true; then
  echo "setup-system: bwrap cannot create its namespaces here; enable unprivileged user namespaces" \
    "(sysctl user.max_user_namespaces=15000; kernel.unprivileged_userns_clone=1 where it exists)" >&2
  exit 1
fi
echo "setup-system: ok (java $java_major, $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g'))"
