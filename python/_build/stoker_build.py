"""A PEP 517 build backend with no dependencies: it zips stoker/*.py into a pure-Python wheel.
The rule: the metadata here must match pyproject.toml's [project] table (name, version, deps)."""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME, VERSION = "stoker", "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: PyTorch client of the Stoker data loader (shared memory / CUDA IPC)
License: MIT
Requires-Python: >=3.9
Requires-Dist: torch
"""
WHEEL = "Wheel-Version: 1.0\nGenerator: stoker_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    pkg = os.path.join(ROOT, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            yield f"{NAME}/{name}", os.path.join(pkg, name)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    wheel_name = f"{NAME}-{VERSION}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, path in _files():
            with open(path, "rb") as f:
                data = f.read()
            z.writestr(arc, data)
            records.append(_record_line(arc, data))
        for arc, text in ((f"{info}/METADATA", METADATA), (f"{info}/WHEEL", WHEEL)):
            z.writestr(arc, text)
            records.append(_record_line(arc, text.encode()))
        records.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/stoker_build.py"):
            t.add(os.path.join(ROOT, rel), f"{base}/{rel}")
        for arc, path in _files():
            t.add(path, f"{base}/{arc}")
        pkg_info = os.path.join(sdist_directory, "PKG-INFO.tmp")
        with open(pkg_info, "w") as f:
            f.write(METADATA)
        t.add(pkg_info, f"{base}/PKG-INFO")
        os.remove(pkg_info)
    return name
