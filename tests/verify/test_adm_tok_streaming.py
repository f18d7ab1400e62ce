"""ADM-TOK-7, ADM-TOK-8: streaming updates grow the queued tokens with no check.

Expected values are written out here: the bound without streaming, Mt - 1 + P for one
server under vLLM's `ge` rule (OB-TOK-1 at N = 1), and the search's cut.
"""

from __future__ import annotations

import pytest

from queueref.admission.protocol import TokenRule
from queueref.verify.streaming_tokens import added_by_update, worst_streaming_tokens


@pytest.mark.parametrize(("cap", "prompt"), [(1, 1), (2, 1), (3, 2), (4, 2)])
@pytest.mark.parametrize("limit", [12, 20])
def test_adm_tok_7_unchecked_updates_grow_past_any_bound(cap: int, prompt: int, limit: int) -> None:
    """ADM-TOK-7: one session alone reaches the search's cut, whatever the cut."""
    found = worst_streaming_tokens(cap, prompt, limit=limit)
    assert found.worst_tokens == limit > cap - 1 + prompt


@pytest.mark.parametrize(("cap", "prompt"), [(1, 1), (2, 1), (3, 2), (4, 2)])
def test_adm_tok_8_ge_check_on_updates_is_not_enough(cap: int, prompt: int) -> None:
    """ADM-TOK-8: vLLM's `ge` rule on an update does not count what it adds: an update
    after the prefill re-adds the whole prompt, so the tokens still reach the cut."""
    found = worst_streaming_tokens(cap, prompt, update_rule=TokenRule.GE, limit=16)
    assert found.worst_tokens == 16


@pytest.mark.parametrize(("cap", "prompt"), [(1, 1), (2, 1), (3, 2), (4, 2), (4, 3)])
def test_adm_tok_8_fits_check_on_updates_restores_the_bound(cap: int, prompt: int) -> None:
    """ADM-TOK-8: refusing an update whose added tokens do not fit keeps the queued
    tokens at Mt - 1 + P, reached with two sessions; the cut no longer matters."""
    for limit in (12, 20):
        found = worst_streaming_tokens(
            cap, prompt, sessions=2, update_rule=TokenRule.FITS, limit=limit
        )
        assert found.worst_tokens == cap - 1 + prompt


def test_adm_tok_7_an_update_after_prefill_adds_the_whole_prompt() -> None:
    """ADM-TOK-7: vLLM sets `prompt_len` to the whole new prompt and prefills it again."""
    assert added_by_update((5, 1), 2) == 2
    assert added_by_update((5, 0), 2) == 7


def test_adm_tok_7_bad_arguments() -> None:
    with pytest.raises(ValueError, match="prompt >= 1"):
        worst_streaming_tokens(2, 0)
