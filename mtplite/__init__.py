"""mtplite: a trained Multi-Token-Prediction drafter head for a frozen on-device LLM, exported to LiteRT."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mtplite")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.1.0"


def load(bundle_dir, threads=2, draft="auto", gate=True, context=True, exact=False):
    """A bundle (the dir `mtplite export` or `mtplite quickstart` wrote) ready to `generate(prompt)`; see
    mtplite.runtime.api."""
    from mtplite.runtime.api import load as _load

    return _load(bundle_dir, threads=threads, draft=draft, gate=gate, context=context, exact=exact)
