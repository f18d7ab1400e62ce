"""The waiting lifecycle's pause states: what a step may take, and what counts as unfinished.

`Pausing` is the part of `queueref.waiting.lifecycle.WaitingQueues` that models
vLLM's `Scheduler.set_pause_state` and `get_num_unfinished_requests`, release
by release (`RULES` in `queueref.waiting.places`; specs/waiting-lifecycle.md,
"One layout per release"):

* PAUSED_ALL: no step takes a waiting request and nothing counts as unfinished
  (0.30.0-0.33.0).
* PAUSED_NEW: vLLM 0.30.0 and 0.31.0 run no waiting loop and count `running`
  only; from 0.32.0 the loop drains `kv_holding_waiting` (never `waiting`) and
  the count adds `kv_holding_waiting` less the paused streaming sessions.
"""

from __future__ import annotations

import icontract

from queueref.waiting.places import RULES, PauseState
from queueref.waiting.state import WaitingState


class Pausing(WaitingState):
    """`set_pause_state`, `num_unfinished` and what a step may select under a pause."""

    @icontract.ensure(
        lambda self, pause_state: self.pause_state is PauseState(pause_state),
        "WL-REL-1: the pause state is the one given",
    )
    def set_pause_state(self, pause_state: PauseState | str) -> None:
        """vLLM's `Scheduler.set_pause_state`; a `PauseState` or its value.

        :raises ValueError: an unknown pause state (nothing changes)
        :raises RuntimeError: called from a step's callback
        """
        # WL-REL-1, WL-STEP-9
        self._require_idle("set_pause_state")
        try:
            state = PauseState(pause_state)
        except ValueError:
            raise ValueError(
                f"WL-REL-1: unknown pause state {pause_state!r}; valid states are "
                + ", ".join(repr(s.value) for s in PauseState)
            ) from None
        self.pause_state = state

    def _loop_runs(self) -> bool:
        """Whether the waiting loop of a step runs at all under the pause state."""
        # WL-REL-1
        if self.pause_state is PauseState.UNPAUSED:
            return True
        return self.pause_state is PauseState.PAUSED_NEW and RULES[self.layout].paused_new_drains_kv

    @property
    def num_unfinished(self) -> int:
        """vLLM's `get_num_unfinished_requests` of the layout's release."""
        # WL-REL-2
        if self.pause_state is PauseState.PAUSED_ALL:
            return 0
        if self.pause_state is PauseState.PAUSED_NEW:
            if not RULES[self.layout].paused_new_drains_kv:
                return len(self.running)
            # vLLM subtracts every paused session, wherever it waits.
            return len(self.running) + len(self._aside) - len(self._paused)
        return len(self.running) + len(self.waiting) + len(self._aside) - len(self._paused)
