"""The Release page without a browser: the planned mechanisms best first, an upload kept with
the session (a bad file refused with one line, the good one kept), what a release costs and
leaves before it is made, a charged release through the pipeline with its published tables and
zip, a refusal over budget that draws nothing, and the teaching sandbox."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from engine.ledger import Budget, Ledger, fingerprint_bytes
from explorer.pages.release import MAX_UPLOAD_BYTES, TEACHING, UPLOAD, ReleasePage
from explorer.session import Session

SPEC = {
    "domain": {"age": {"size": 8, "kind": "numeric"}, "sex": {"size": 2, "labels": ["F", "M"]}},
    "workload": [{"product": {"age": "identity", "sex": "identity"}},
                 {"product": {"age": "identity"}}],
    "privacy": {"noise": "zcdp", "rho": 0.25},
    "mechanisms": ["identity", "workload"],
}


def records_csv(count: int = 300, seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    ages = rng.integers(0, 8, count)
    sexes = rng.choice(["F", "M"], count)
    lines = ["age,sex"] + [f"{a},{s}" for a, s in zip(ages, sexes, strict=True)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


@pytest.fixture
def page(ledger_url: str) -> ReleasePage:
    session = Session(spec=SPEC)
    session.compare_now()
    return ReleasePage(session=session, ledger_url=ledger_url)


def test_the_planned_mechanisms_are_offered_best_first(page: ReleasePage) -> None:
    rows = page.session.comparison.rows
    assert page.param.mechanism.objects == [r.mechanism for r in rows if r.plan is not None]
    assert page.mechanism == page.param.mechanism.objects[0]
    rmse = {r.mechanism: r.rmse for r in rows}
    assert rmse[page.mechanism] == min(rmse.values())


def test_an_upload_stays_with_the_session_and_a_bad_file_keeps_the_good_one(
        page: ReleasePage) -> None:
    assert page.data_error.startswith("data: upload a CSV file")
    page.take_upload(records_csv(), "people.csv")
    assert page.data_error == ""
    assert page.data_status == "people.csv: 300 records over age, sex."
    assert page.session.upload.name == "people.csv"
    # another page of the same session sees the same file
    assert ReleasePage(session=page.session).data_status == page.data_status

    page.take_upload(b"age,sex\n3,X\n", "typo.csv")
    assert "sex" in page.data_error and "X" in page.data_error
    assert page.data_error.endswith("(still using people.csv)")
    assert "\n" not in page.data_error
    page.take_upload("age,sex\n3,F\u00e9\n".encode("latin-1"), "latin.csv")
    assert page.data_error.startswith("data: latin.csv is not UTF-8 text")
    page.take_upload(b"", "empty.csv")
    assert page.data_error.startswith("data: empty.csv is empty")
    page.take_upload(b"age\n1\n", "no-sex.csv")
    assert "sex" in page.data_error
    assert page.session.upload.name == "people.csv"


def test_a_file_over_the_limit_is_refused_before_it_is_parsed(page: ReleasePage,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setattr("explorer.pages.release.MAX_UPLOAD_BYTES", 10)
    page.take_upload(records_csv(5), "big.csv")
    assert page.data_error.startswith("data: big.csv is 0 MB; at most 0 MB")
    assert page.session.upload is None
    assert MAX_UPLOAD_BYTES == 200 * 2**20


def test_a_registered_upload_is_charged_and_refused_over_budget(page: ReleasePage,
                                                                ledger_url: str) -> None:
    content = records_csv()
    page.take_upload(content, "people.csv")
    assert page.quote_line.startswith("Not charged (rho=0.25): data set not registered")
    with Ledger(ledger_url) as ledger:
        ledger.register("people", fingerprint_bytes(content), Budget("rho", 0.4))
    page.update_quote()
    assert page.quote_line.startswith("This release costs rho=0.25, charged to people")
    assert "remaining after it: 0.15" in page.quote_line

    page.make_release()
    assert page.error == ""
    assert page.released is not None and page.released.charged is not None
    assert "charged rho=0.25 to people: spent 0.25 of rho=0.4" in page.release_status
    frame = page.table_frame()
    assert len(frame) > 0
    names = set(zipfile.ZipFile(io.BytesIO(page.tables_zip())).namelist())
    assert "release.json" in names and len(names) == 1 + len(page.released.tables.frames)
    record = json.loads(zipfile.ZipFile(io.BytesIO(page.tables_zip())).read("release.json"))
    assert record["data_sha256"] == fingerprint_bytes(content)
    assert record["budget"]["spent"] == pytest.approx(0.25, abs=1e-12)

    page.make_release()  # 0.25 more does not fit in the 0.15 left
    assert page.release_status == "Refused: nothing was drawn or released."
    assert "people" in page.error and "0.15" in page.error
    with Ledger(ledger_url) as ledger:
        assert ledger.status("people").releases == 1


def test_the_bundled_data_is_the_teaching_sandbox(ledger_url: str) -> None:
    spec = {**SPEC, "domain": {"sex": 2, "income>50K": 2},
            "workload": [{"product": {"sex": "identity", "income>50K": "identity"}}]}
    session = Session(spec=spec)
    session.compare_now()
    page = ReleasePage(session=session, ledger_url=ledger_url)
    page.source = TEACHING
    assert page.data_status == "the bundled Adult data: 48,842 records over sex, income>50K."
    assert page.quote_line.startswith("Not charged (rho=0.25): teaching: not a private release")
    page.make_release()
    assert page.released.charged is None
    assert page.released.record["notice"] == "teaching: not a private release"
    assert page.table_frame()["estimate" if "estimate" in page.table_frame() else
                              page.table_frame().columns[-1]].notna().all()


def test_the_bundled_data_must_fit_the_workload(page: ReleasePage) -> None:
    page.source = TEACHING
    assert page.data_error.startswith("data: the bundled Adult data's attribute sizes differ")
    page.source = UPLOAD
    assert page.data_error.startswith("data: upload a CSV file")
