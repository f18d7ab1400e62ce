"""The contracts of `AdmissionCheck`, declared beside it and attached when
`queueref.admission` is imported (`queueref.admission.contracts`): the order of the
steps. The same order is kept under `python -O` by the check's own `_check_step`.
"""

from __future__ import annotations

import icontract

from queueref.admission.check import AdmissionCheck
from queueref.preconditions import install, original


@install(AdmissionCheck)
@icontract.require(
    lambda self: self.is_open, "ADM-CTL-7: the check is still open", error=RuntimeError
)
@icontract.require(
    lambda self: not self.done, "ADM-CTL-7: a slot is left to read", error=RuntimeError
)
@icontract.snapshot(lambda self: self.reads, name="reads")
@icontract.ensure(
    lambda self, OLD: self.reads == OLD.reads + 1,
    "ADM-CTL-7, ADM-TOK-2: one read advances by exactly one slot of one pass",
)
@original(AdmissionCheck)
def read_next() -> None: ...


@install(AdmissionCheck)
@icontract.require(
    lambda self: self.is_open, "ADM-CTL-7: the check is still open", error=RuntimeError
)
@icontract.require(
    lambda self: self.done,
    "ADM-CTL-7: decide only after every slot is read",
    error=RuntimeError,
)
@icontract.ensure(lambda self: not self.is_open, "ADM-CTL-7: a decided check is closed")
@original(AdmissionCheck)
def decide() -> None: ...
