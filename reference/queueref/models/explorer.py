"""The exhaustive explorer of the cross-process admission protocols: one name for two jobs.

The models (the protocols and their broken variants as transition systems) are
`queueref.models.admission_models`; the breadth-first search over them (worst cases,
witnesses, spurious rejections, capacity leaks) is `queueref.models.search`. Both are
named here, so `from queueref.models.explorer import explore, CheckThenWrite` works.
"""

from __future__ import annotations

from queueref.models.admission_models import CHECK_THEN_WRITE as CHECK_THEN_WRITE
from queueref.models.admission_models import PROTOCOLS as PROTOCOLS
from queueref.models.admission_models import WRITE_THEN_CHECK as WRITE_THEN_CHECK
from queueref.models.admission_models import AsyncGap as AsyncGap
from queueref.models.admission_models import CheckThenWrite as CheckThenWrite
from queueref.models.admission_models import CompactCheckThenWrite as CompactCheckThenWrite
from queueref.models.admission_models import Crash as Crash
from queueref.models.admission_models import LazyRefresh as LazyRefresh
from queueref.models.admission_models import Model as Model
from queueref.models.admission_models import RawStep as RawStep
from queueref.models.admission_models import State as State
from queueref.models.admission_models import StateLimitExceeded as StateLimitExceeded
from queueref.models.admission_models import Step as Step
from queueref.models.admission_models import WriteThenCheck as WriteThenCheck

# Re-exported: callers of the explorer name the bound it is measured against.
from queueref.models.protocol import overshoot_bound as overshoot_bound
from queueref.models.search import ENCODINGS as ENCODINGS
from queueref.models.search import ENGINES as ENGINES
from queueref.models.search import Exploration as Exploration
from queueref.models.search import Leak as Leak
from queueref.models.search import Search as Search
from queueref.models.search import capacity_leak as capacity_leak
from queueref.models.search import explore as explore
from queueref.models.search import make_model as make_model
from queueref.models.search import replay as replay
from queueref.models.search import search as search
from queueref.models.search import worst_spurious_rejection as worst_spurious_rejection
