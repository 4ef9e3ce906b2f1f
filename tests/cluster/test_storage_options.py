"""The one mapping from delta-rs style ``storage_options`` to fsspec and pyarrow filesystems."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from kb_ray.catalog.storage import filesystem, fsspec_filesystem, fsspec_options, s3_settings

OPTIONS = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "aws_region": "eu-west-1", "AWS_ALLOW_HTTP": "true",
           "conditional_put": "etag"}


def test_s3_settings_accept_object_store_spellings():
    assert s3_settings(OPTIONS) == {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1"}
    assert s3_settings({"endpoint": "http://h:1", "AWS_DEFAULT_REGION": "r", "access_key_id": "k",
                        "AWS_SECRET_ACCESS_KEY": "s", "aws_token": "t"}) == {
        "endpoint": "http://h:1", "region": "r", "access_key_id": "k", "secret_access_key": "s",
        "session_token": "t"}


def test_fsspec_options_for_s3_and_nothing_for_other_paths():
    assert fsspec_options("s3://bucket/docs/a.pdf", OPTIONS) == {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
        "use_listings_cache": False}
    assert fsspec_options("/data/a.pdf", OPTIONS) == {}
    assert fsspec_options("https://example.org/a.pdf", OPTIONS) == {}


def test_pyarrow_s3_filesystem_from_the_same_options():
    fs, path = filesystem("s3://bucket/kb/tables/chunks", OPTIONS)
    assert isinstance(fs, pafs.S3FileSystem) and path == "bucket/kb/tables/chunks"
    assert fs.region == "eu-west-1"


def test_s3fs_filesystem_from_the_same_options():
    pytest.importorskip("s3fs")
    fs, path = fsspec_filesystem("s3://bucket/docs/", OPTIONS)
    assert path.rstrip("/") == "bucket/docs"
    assert fs.client_kwargs == {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}


def test_local_paths_stay_local(tmp_path):
    fs, path = fsspec_filesystem(str(tmp_path), OPTIONS)
    assert fs.isdir(path)
    assert isinstance(filesystem(str(tmp_path), OPTIONS)[0], pafs.LocalFileSystem)
