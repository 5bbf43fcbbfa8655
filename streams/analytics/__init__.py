"""Services over core and the stored history (sinks.queries): forecasts, learned alphas, power sizing, backtests."""


class Abandoned(Exception):
    """Heavy work (a sizing, a forecast) stopped at a check because the request that wanted it went (its
    time limit, its client gone): streams.web.base.WebContext.heavy sets the request's cancel event."""


def stop_if_abandoned(cancel, what: str) -> None:
    """Raise Abandoned when ``cancel`` (a threading.Event, or None) is set; ``what``: the step not begun."""
    if cancel is not None and cancel.is_set():
        raise Abandoned(f"the request went before {what}")
