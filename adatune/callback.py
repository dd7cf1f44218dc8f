"""``adatune.callback``: the tuning callbacks, which live with the tuners (``adatune.tuners.callback``)."""

from .tuners.callback import Callback, log_to_file, progress_bar

__all__ = ["Callback", "log_to_file", "progress_bar"]
