"""The contracts of the admission core, declared beside the logic they check.

Imported by `queueref.admission` itself, so they are attached before any admission
class can be used, whatever is imported first; the logic modules never import
them. One module per logic module, each attached as its decorators would be.
"""

from queueref.admission.contracts import check as check
from queueref.admission.contracts import controller as controller
from queueref.admission.contracts import shared_stats as shared_stats
from queueref.admission.contracts import tracker as tracker

__all__ = ["check", "controller", "shared_stats", "tracker"]
