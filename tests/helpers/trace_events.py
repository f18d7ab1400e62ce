"""The events of hand-written admission traces, shared by the trace checker's tests: one
builder per kind, a departure a hundredth of a second after its `t_before`."""

from __future__ import annotations

from queueref.trace.events import AdmissionEvent


def admit(
    t: float,
    server: int,
    rid: str,
    view: int | None,
    n: int = 1,
    *,
    tokens: int | None = None,
    token_view: int | None = None,
) -> AdmissionEvent:
    return AdmissionEvent(
        t, server, "admit", rid, n, view=view, tokens=tokens, token_view=token_view
    )


def reject(t: float, server: int, rid: str, view: int | None, n: int = 1) -> AdmissionEvent:
    return AdmissionEvent(t, server, "reject", rid, n, view=view)


def finish(t: float, server: int, rid: str, n: int = 1) -> AdmissionEvent:
    return AdmissionEvent(t, server, "finish", rid, n, t_before=t - 0.01)


def abort(t: float, server: int, rid: str, n: int = 1) -> AdmissionEvent:
    return AdmissionEvent(t, server, "abort", rid, n, t_before=t - 0.01)
