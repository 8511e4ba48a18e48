"""A record read back (an evaluation's run.json, as `rerun` reads it) is checked as the command line's values are:
its model spec, its threads, each method's settings (type, bounds, choices), no setting or method this mhindex does
not know, and no file it names outside the data root (a tampered record must not read a file of the user's and
send it to the model server the same record names). Each is one line naming the record, the method and the
setting; nothing is answered. Before, `"lm": 5` was a traceback, `oner.k` of -5 was run, an unknown setting was
dropped without a word, and R1-Searcher's prompt setting read any .txt file its path reached."""

from __future__ import annotations

import json
import re

import pytest


@pytest.fixture
def folder(mh, home, tmp_path):
    assert mh("--quiet", "build", "musique").code == 0
    out = tmp_path / "eval"
    done = mh("eval", "musique", "--method", "retrieve", "--limit", "2", "--out", out, "--quiet")
    assert done.code == 0, done.err
    return out


def _tampered(folder, change) -> None:
    run = json.loads((folder / "run.json").read_text())
    change(run)
    (folder / "run.json").write_text(json.dumps(run))


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda run: run.update(lm=5), "run.json: --lm takes str, not 5"),
        (lambda run: run.update(lm_threads=-2), "run.json: --lm-threads must be at least 1, not -2"),
        (lambda run: run.update(backend=["lucene"]), "run.json: backend must be a backend's name"),
        (lambda run: run["settings"]["retrieve"].update(k=-5), "retrieve: -k must be at least 1, not -5"),
        (lambda run: run["settings"]["retrieve"].update(k="5"), "retrieve: -k takes int, not '5'"),
        (
            lambda run: run["settings"]["retrieve"].update(colour="red"),
            "retrieve records settings this mhindex does not know: colour",
        ),
        (lambda run: run.update(settings={"nosuchmethod": {}}), "no method 'nosuchmethod'|nosuchmethod"),
        (lambda run: run.update(settings=[1]), "settings is not a JSON object"),
    ],
)
def test_a_tampered_run_json_is_refused_in_one_line_before_anything_is_asked(mh, folder, change, said):
    _tampered(folder, change)
    done = mh("rerun", folder)
    assert done.code == 2 and "Traceback" not in done.err, done.err
    assert len(done.err.strip().splitlines()) == 1, done.err
    assert re.search(said, done.err), done.err


def test_a_record_names_no_file_outside_the_data_root_nor_a_prompt_of_its_own(mh, folder, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's own file")
    for method, setting, value in [
        ("searchain", "chain_prompt", str(secret)),
        ("kdcot", "instruction", str(secret)),
        ("r1searcher", "r1_prompt", "../../../../" + str(secret.with_suffix(""))),
    ]:
        _tampered(folder, lambda run, given={method: {setting: value}}: run.update(settings=given))
        done = mh("rerun", folder)
        assert done.code == 2 and "Traceback" not in done.err, done.err
        assert "outside the data root" in done.err or "must be one of v0" in done.err, done.err
