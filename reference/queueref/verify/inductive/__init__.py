"""The inductive invariants of the admission protocols: the kernels of the CrossHair proofs.

One module per model, and what they share; read `common.py` first, then the models in
this order:

* `atomic.py` -- a check reads the whole sum in one step (a snapshot); the write of an
  admitted request comes later; finishes at any time.
* `fine.py` -- check-then-write as vLLM 0.30.0 does it: a check reads the slots one at a
  time in index order, other servers act between any two reads, and the decision writes
  the own slot in the same step (deciding earlier and writing later is the same thing:
  the decision itself changes no shared state, so it commutes with the other servers'
  steps).
* `write_then_check.py` -- add n to the own slot first, read every slot, keep the
  reservation iff the view is `<= cap`, otherwise write it back.

Each obligation of `proofs/generated/` takes the whole state of a fixed number of servers
as scalar `int` arguments, assumes the invariant, takes one step with these functions and
must re-establish the invariant (OB-ATOMIC-1, OB-FINE-1, OB-WTC-1). The same step
functions are replayed against the exhaustive explorer in
`tests/verify/test_ob_one_transition_system.py`, so the proofs are about the transition
system the explorer enumerates. All three models have N servers, a cap M (`cap`) and a
largest request weight W (`weight`).

**Ghost state.** The fine and write-then-check invariants need facts about the past that
the real state forgets. They are kept in ghost variables that no step reads to decide
anything:

* `G` -- the start-rank counter; each check gets the next rank when it starts, so ranks
  order checks by start time.
* per reader x and slot q: `r` the value x read from q; for fine also `a` a credit (the
  weight of the check q had in progress when x read q, so the most q's slot can grow
  without q starting a later check) and `s` the rank of that check (-1 if q was idle).
* the leader: the admitted check with the latest start (rank `RL`, server `L`), with the
  values it read (`ld`) and its credits (`al`, `sl`). Readers that started before the
  leader are *stale*: they can never become leader again.

The paper proofs these encode are in `specs/overshoot-bound.md` (of OB-BOUND-1 and OB-WTC-1).
"""
