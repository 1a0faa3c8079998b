"""The JVM tools the Kotlin tests need, installed on first use into .kotlin-build/ (nothing system-wide), so the
README's one test command holds on a fresh machine: kotlinc from npm's kotlin-compiler, JUnit 5 jars unpacked from
Debian's packages. A registry that cannot be reached skips with the reason; any other failure fails."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / ".kotlin-build"
KOTLIN = "2.4.20"
JUNIT_DEBS = ("junit5", "libapiguardian-java", "libopentest4j-java")
OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network|Temporary failure resolving|Could not "
                     r"resolve|Failed to fetch|Unable to connect", re.I)


def _run(cmd, what, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    if r.returncode:
        msg = (r.stderr or r.stdout)[-1500:]
        if OFFLINE.search(msg):
            pytest.skip(f"{what}: the registry cannot be reached ({msg.strip().splitlines()[-1]})")
        pytest.fail(f"{what} failed: {' '.join(cmd)}\n{msg}")
    return r


def kotlinc():
    """kotlinc-jvm: .kotlin-build's (installed here on first use), else one on PATH."""
    mine = BUILD / "node_modules" / "kotlin-compiler" / "bin" / "kotlinc-jvm"
    if mine.exists():
        return mine
    found = shutil.which("kotlinc-jvm") or shutil.which("kotlinc")
    if found:
        return Path(found)
    if not shutil.which("npm"):
        pytest.fail("npm is needed to install kotlin-compiler (apt-get install npm)")
    BUILD.mkdir(exist_ok=True)
    _run(["npm", "install", "--no-audit", "--no-fund", "--silent", f"kotlin-compiler@{KOTLIN}"], "npm kotlin-compiler",
         cwd=BUILD)
    assert mine.exists(), f"npm installed kotlin-compiler but {mine} is missing"
    return mine


def junit():
    """The folder holding JUnit 5's jars: the system's (Debian junit5 installed), else unpacked into .kotlin-build."""
    system = Path("/usr/share/java")
    if (system / "junit-platform-console-standalone.jar").exists() and (system / "opentest4j.jar").exists():
        return system
    mine = BUILD / "junit" / "usr" / "share" / "java"
    if (mine / "junit-platform-console-standalone.jar").exists():
        return mine
    debs = BUILD / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["apt-get", "download", *JUNIT_DEBS], cwd=debs, capture_output=True, text=True, timeout=600)
    if r.returncode and os.geteuid() == 0:  # no package lists yet on a fresh image
        _run(["apt-get", "update", "-qq"], "apt-get update")
        r = None
    if r is None or r.returncode:
        _run(["apt-get", "download", *JUNIT_DEBS], "apt-get download junit5", cwd=debs)
    for deb in debs.glob("*.deb"):
        _run(["dpkg", "-x", str(deb), str(BUILD / "junit")], f"dpkg -x {deb.name}")
    assert (mine / "junit-platform-console-standalone.jar").exists(), f"{mine}: JUnit jars missing after unpacking"
    return mine
