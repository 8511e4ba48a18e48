"""Fetching the official release files: resumable (HTTP Range on a `.part` file), verified
against the published checksum where one exists (otherwise the sha256 is recorded so that a
later download can be compared), and unpacked when the release is an archive of JSON files.

`MHINDEX_DOWNLOAD_MIRROR=URL` fetches every file as URL/<filename> instead, for a mirror
(and for tests against a server on 127.0.0.1).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from mhindex.errors import MhindexError
from mhindex.files import file_digest, unlinked
from mhindex.ui import reporter


@dataclass(frozen=True)
class Download:
    url: str
    filename: str
    checksum: str | None = None  # "algorithm:hexdigest" as published by a third party, when known
    size: int | None = None
    unpack: bool = False  # an archive of the release's JSON files: unpack them flat beside it


class DownloadError(MhindexError):
    pass


def _source_url(item: Download) -> str:
    mirror = os.environ.get("MHINDEX_DOWNLOAD_MIRROR")
    return f"{mirror.rstrip('/')}/{item.filename}" if mirror else item.url


def _fetch_once(session, url: str, part: Path) -> None:
    """One request for what the `.part` file lacks (a Range from its size); appends to it."""
    import httpx

    have = unlinked(part).stat().st_size if part.exists() else 0
    with session.stream("GET", url, headers={"Range": f"bytes={have}-"} if have else {}) as response:
        if response.status_code == 416 and have:  # asked past the end: the part file is already complete
            return
        if response.status_code >= 400:  # 429 and 5xx were retried by the transport already
            raise DownloadError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
        resumed = have and response.status_code == 206
        if have and not resumed:
            have = 0  # the server ignored Range: start over
        length = response.headers.get("Content-Length")
        total = have + int(length) if length else None
        with (
            open(part, "ab" if resumed else "wb") as out,
            reporter().progress(f"downloading {part.name[:-5]}", total=total, unit="bytes") as bar,
        ):
            bar.update(completed=have)
            for chunk in response.iter_raw():  # as it arrives: a cut keeps every byte received
                out.write(chunk)
                bar.advance(len(chunk))
        if total is not None and part.stat().st_size < total:
            raise httpx.ReadError(f"connection closed after {part.stat().st_size} of {total} bytes")


def fetch(item: Download, folder: Path, retries: int = 4, timeout: float = 60.0, backoff: float = 1.0) -> Path:
    """Download one release file into `folder` (resuming a `.part` left by an earlier try).

    Error answers are retried by the HTTP layer; a connection that breaks mid-way is resumed
    here with a Range request for the rest, up to `retries` times."""
    import httpx

    from mhindex import http

    folder.mkdir(parents=True, exist_ok=True)
    final = folder / item.filename
    if final.is_file():
        return final
    part = folder / (item.filename + ".part")
    url = _source_url(item)
    with http.client(timeout=timeout, retries=retries, backoff=backoff, headers={"User-Agent": "mhindex"}) as session:
        for attempt in range(retries + 1):
            try:
                _fetch_once(session, url, part)
                break
            except httpx.TransportError as error:
                if attempt == retries:
                    reason = str(error) or type(error).__name__
                    raise DownloadError(f"{url}: {reason} (after {retries + 1} tries; run again to resume)") from None
                time.sleep(min(backoff * 2**attempt, 30))
    if item.size is not None and part.stat().st_size != item.size:
        raise DownloadError(f"{url}: got {part.stat().st_size} bytes, expected {item.size}; delete {part} and retry")
    if item.checksum:
        algorithm, expected = item.checksum.split(":", 1)
        actual = file_digest(part, algorithm)
        if actual != expected:
            part.unlink()
            raise DownloadError(
                f"{url}: {algorithm} checksum mismatch (got {actual}, expected {expected}); the partial file "
                "was removed"
            )
    os.replace(part, final)
    return final


def unpack(archive: Path, folder: Path) -> list[Path]:
    """Extract the data files of a zip or tar archive flat into `folder` (no paths from the archive)."""
    extracted = []

    def wanted(name: str) -> bool:
        base = os.path.basename(name)
        return bool(base) and not base.startswith(".") and "__MACOSX" not in name

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as bundle:
            for info in bundle.infolist():
                if info.is_dir() or not wanted(info.filename):
                    continue
                target = folder / os.path.basename(info.filename)
                with bundle.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
                extracted.append(target)
    else:
        with tarfile.open(archive, "r:*") as tarball:
            for member in tarball:
                if not member.isfile() or not wanted(member.name):
                    continue
                target = folder / os.path.basename(member.name)
                extracted_file = tarball.extractfile(member)
                if extracted_file is None:
                    continue
                with extracted_file as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
                extracted.append(target)
    return extracted


def download_release(dataset, folder: Path, only: list[str] | None = None) -> list[Path]:
    """Fetch (and unpack) a dataset's official files; records their sha256 in `SHA256SUMS.json`."""
    items = [d for d in dataset.release if not only or d.filename in only]
    if only and not items:
        names = ", ".join(d.filename for d in dataset.release)
        raise DownloadError(f"{dataset.name} has no release file named {', '.join(only)} (files: {names})")
    sums_path = folder / "SHA256SUMS.json"
    sums = orjson.loads(sums_path.read_bytes()) if sums_path.is_file() else {}
    fetched = []
    for item in items:
        path = fetch(item, folder)
        digest = file_digest(path, "sha256")
        if sums.get(item.filename, digest) != digest:
            raise DownloadError(f"{path}: differs from the copy downloaded before (sha256 {sums[item.filename]})")
        sums[item.filename] = digest
        if item.unpack:
            fetched.extend(unpack(path, folder))
        else:
            fetched.append(path)
    sums_path.write_bytes(orjson.dumps(sums, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return fetched
