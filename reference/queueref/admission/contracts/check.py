"""The contracts of `AdmissionCheck`, declared beside it and attached when
`queueref.admission` is imported (`queueref.admission.contracts`): what one step
does. The order of the steps (a read only while a slot is left, a decision only
after the last one, nothing after a close) is declared once, in the check's own
`_check_step`, and holds under `python -O` too.
"""

from __future__ import annotations

import icontract

from queueref.admission.check import AdmissionCheck
from queueref.preconditions import install, original


@install(AdmissionCheck)
@icontract.snapshot(lambda self: self.reads, name="reads")
@icontract.ensure(
    lambda self, OLD: self.reads == OLD.reads + 1,
    "ADM-CTL-7, ADM-TOK-2: one read advances by exactly one slot of one pass",
)
@original(AdmissionCheck)
def read_next() -> None: ...


@install(AdmissionCheck)
@icontract.ensure(lambda self: not self.is_open, "ADM-CTL-7: a decided check is closed")
@original(AdmissionCheck)
def decide() -> None: ...
