"""Cross-process admission control: `max_num_queued_reqs` shared by API servers (vLLM PR #54746).

Read in this order:

1. `protocol` -- the protocol rules and the bound `M + (N-1)*min(M, W)`: the one
   transition system the controller, the explorer, the proofs and the trace checker share.
2. `shared_stats` -- the per-server counters, one 64-byte cache line each.
3. `tracker` (with its list statement `tracker_model`) -- one server's unfinished requests.
4. `controller` -- `AdmissionController.check_admission`: the decision.
5. `front` -- an API server's front door: check, register, finish.
"""

from queueref.admission import contracts as contracts  # attaches the contracts
