"""Engine identity from version banners (pure): the same engine under a new banner format is the
same engine; another version or build is not."""

from __future__ import annotations

from dayzero.checks.correctness import provenance_differs
from dayzero.spec.engine_identity import EngineIdentity, parse, same_engine

NOW = "llama-cpp-python 0.3.36 sdist, vendor/llama.cpp version: 0.5.0-dev (build 0, commit unknown)"
BEFORE = "version: 0.5.0-dev (build 0, commit unknown) built with GNU 12.2.0 for Linux x86_64"


def test_banners_parse_into_version_and_known_build():
    assert parse(NOW) == EngineIdentity("0.5.0-dev", "llama-cpp-python 0.3.36")
    assert parse(BEFORE) == EngineIdentity("0.5.0-dev", "")  # build 0, commit unknown: not known
    assert parse("version: 6210 (5ec1e2e3) built with cc") == EngineIdentity("6210", "commit 5ec1e2e3")
    assert parse("0.5.23") == EngineIdentity("0.5.23")  # sglang.__version__
    assert parse("no version here") is None


def test_the_same_engine_under_another_banner_format_is_the_same_engine():
    assert same_engine(NOW, BEFORE)
    assert provenance_differs({"engine_version": BEFORE, "recipe_digest": "a"}, "a", NOW) == []


def test_another_version_or_build_is_another_engine():
    assert not same_engine(NOW, NOW.replace("0.5.0-dev", "0.6.0"))
    assert not same_engine(NOW, NOW.replace("0.3.36", "0.3.40"))
    assert not same_engine("version: 6210 (5ec1e2e3)", "version: 6210 (aaaaaaa1)")
    assert not same_engine("b100", "b200")  # no version in them: compared as written
    assert same_engine("b100", " b100 ")
