"""Fetch the real-document eval corpus: documentation shipped in pinned Debian packages.

Every package of ``manifest.json`` is downloaded at its pinned version with
``apt-get download PKG=VERSION``, unpacked with ``dpkg -x``, and the selected files are
copied (gunzipped where the package ships ``.gz``) under flat names into the corpus
folder. Each copied file must match the sha256 recorded in the manifest, so the quotes of
``queries.jsonl`` keep resolving; a mismatch stops the script.

    python benchmarks/realdocs/fetch.py                  # -> benchmarks/work/realdocs/corpus
    python benchmarks/realdocs/fetch.py --any-version    # pinned version gone: take the candidate,
                                                         # the sha256 check still decides
    python benchmarks/realdocs/fetch.py --write-hashes   # maintainers: record new hashes
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
DEFAULT_WORK = HERE.parent / "work" / "realdocs"
log = logging.getLogger("realdocs.fetch")


class FetchError(RuntimeError):
    """A package cannot be downloaded, or a selected file is missing or has changed."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    if not args.no_update:
        _run(["apt-get", "update"], cwd=None)
    corpus = args.work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    try:
        for package in manifest["packages"]:
            root = _unpacked(package, work=args.work, any_version=args.any_version)
            for entry in package["files"]:
                _copy(entry, root=root, corpus=corpus, write_hash=args.write_hashes)
    except FetchError as exc:
        log.error("error: %s", exc)
        return 1
    if args.write_hashes:
        MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    log.info("corpus: %d files in %s", len(list(corpus.iterdir())), corpus)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"work dir (default: {DEFAULT_WORK})")
    parser.add_argument("--no-update", action="store_true", help="skip 'apt-get update'")
    parser.add_argument("--any-version", action="store_true",
                        help="if the pinned version is no longer in the archive, download the candidate one")
    parser.add_argument("--write-hashes", action="store_true", help="record the files' sha256 in manifest.json")
    return parser


def _unpacked(package: dict, *, work: Path, any_version: bool) -> Path:
    """The package's files unpacked under ``work/extract/PKG`` (downloaded once)."""
    debs, root = work / "debs", work / "extract" / package["package"]
    debs.mkdir(parents=True, exist_ok=True)
    deb = _download(package["package"], package["version"], debs=debs, any_version=any_version)
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        _run(["dpkg", "-x", str(deb), str(tmp)], cwd=None)
        tmp.rename(root)
    return root


def _download(name: str, version: str, *, debs: Path, any_version: bool) -> Path:
    pinned = sorted(debs.glob(f"{name}_*{version.split(':')[-1]}_*.deb"))
    if pinned:
        return pinned[0]
    try:
        _run(["apt-get", "download", f"{name}={version}"], cwd=debs)
    except FetchError:
        if not any_version:
            raise FetchError(f"{name}={version} cannot be downloaded (no longer in the archive?); "
                             "rerun with --any-version to try the candidate version") from None
        log.warning("%s=%s is gone; downloading the candidate version", name, version)
        _run(["apt-get", "download", name], cwd=debs)
    found = sorted(debs.glob(f"{name}_*.deb"))
    if not found:
        raise FetchError(f"apt-get download {name} left no .deb in {debs}")
    return found[-1]


def _copy(entry: dict, *, root: Path, corpus: Path, write_hash: bool) -> None:
    source = root / entry["member"]
    if not source.exists():
        raise FetchError(f"{entry['member']} is not in the unpacked package {root.name}")
    data = source.resolve().read_bytes()
    if entry["member"].endswith(".gz"):
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    if write_hash:
        entry["sha256"] = digest
    elif digest != entry["sha256"]:
        raise FetchError(f"{entry['name']}: sha256 {digest} differs from the manifest's {entry['sha256']}; "
                         "the document changed, so its quotes may no longer resolve")
    (corpus / entry["name"]).write_bytes(data)


def _run(command: list[str], *, cwd: Path | None) -> None:
    log.info("$ %s", " ".join(command))
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise FetchError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")


if __name__ == "__main__":
    sys.exit(main())
