"""The start-up update check against a real git checkout with release tags."""

from __future__ import annotations

import subprocess

import pytest

from prism_challenge.validator.update_check import check_for_update


def _git(repo, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    repo = tmp_path / "prism"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "release")
    return repo


def test_behind_the_newest_release_says_what_to_run(checkout):
    for tag in ("v0.1.0", "v0.10.0", "v0.9.1", "v1.0.0-rc1", "nightly"):  # 0.10 > 0.9, numerically
        _git(checkout, "tag", tag)
    check = check_for_update(checkout, running="0.9.1")
    assert (check.latest, check.behind) == ("v0.10.0", True)
    assert f"git -C {checkout} checkout v0.10.0 && make -C {checkout} setup" in check.advice
    assert "SIGTERM" in check.advice and "back up the store" in check.advice


def test_up_to_date_and_ahead(checkout):
    _git(checkout, "tag", "v0.1.0")
    for running in ("0.1.0", "0.2.0"):
        check = check_for_update(checkout, running=running)
        assert (check.latest, check.behind) == ("v0.1.0", False)
        assert "up to date" in check.advice


def test_no_tags_no_checkout_and_an_unreleased_version(checkout, tmp_path):
    check = check_for_update(checkout, running="0.1.0")
    assert (check.latest, check.behind) == (None, False)
    assert f"git -C {checkout} fetch --tags" in check.advice
    bare = tmp_path / "installed"
    bare.mkdir()
    check = check_for_update(bare, running="0.1.0")
    assert not check.behind and "not a git checkout" in check.advice
    _git(checkout, "tag", "v9.0.0")
    check = check_for_update(checkout, running="0.1.0.dev3")
    assert not check.behind and "not a release" in check.advice
