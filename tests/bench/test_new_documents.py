"""`bench.new_documents`' report: the customer's share of a core after the burst against its
target, the figures beside it, and its documents all new (the pass itself runs in the smoke
test)."""

from __future__ import annotations

from typing import Any

from graphql import parse

from bench import new_documents


def _results(*, after_burst: float | None, kept_up: bool = True) -> dict[str, Any]:
    return {
        "settings": {"seconds": 25.0, "idle_seconds": 5.0},
        "offered": 2500, "admitted": 349, "refused": 2151, "failed": 0, "failures": [],
        "offering_seconds": 25.0, "answered_seconds": 25.1, "burst_seconds": 1.5,
        "sender_latest_ms": 8.3, "sender_kept_up": kept_up, "idle_share": 0.006,
        "share_after_burst": after_burst, "share_whole_phase": 0.31,
        "target": 0.25, "met": after_burst is not None and after_burst <= 0.25,
        "charged": 100, "rate": 1000, "burst": 10000, "per_second": 100.0,
        "aliases": 15, "document_cost": 75, "seconds": 40.0,
    }  # fmt: skip


def test_the_share_after_the_burst_is_said_against_its_target() -> None:
    rendered = new_documents.render(_results(after_burst=0.239))

    assert "15 aliased lookups (cost 75, charged 100, the new-document floor)" in rendered
    assert "(1000 / 100 = 10 a second, burst 10,000): 100 a second for 25 s" in rendered
    assert "the sender kept its pace (at most 8.3 ms late)" in rendered
    assert "349 of 2,500 admitted, 2,151 refused, the first refused after 1.5 s" in rendered
    assert "23.9% of a core after the burst, 31.0% over the whole phase" in rendered
    assert rendered.endswith("target at most 25% after the burst: met")


def test_over_a_quarter_of_a_core_or_no_figure_misses_the_target() -> None:
    over = _results(after_burst=0.266, kept_up=False)
    [target] = new_documents.targets(over)
    assert target.measured == {"local": 0.266} and target.met is False
    assert "the sender fell behind" in new_documents.render(over)

    # A phase too short to pass the burst has no figure (null in the JSON file).
    unmeasured = _results(after_burst=None)
    [target] = new_documents.targets(unmeasured)
    assert target.met is False
    assert "not measured of a core after the burst" in new_documents.render(unmeasured)


def test_every_document_is_new_text_of_fifteen_lookups() -> None:
    refs = [("loan-00", f"payment-{n}") for n in range(15)]
    texts = {new_documents.document(number, refs) for number in range(100)}

    assert len(texts) == 100
    [operation] = parse(next(iter(texts))).definitions
    assert len(operation.selection_set.selections) == 15  # type: ignore[attr-defined]
