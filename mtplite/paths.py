"""Where generated artifacts go, and how they are written without ever leaving a half-written file behind."""
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("MTPLITE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mtplite")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


@contextmanager
def atomic_path(final):
    """Yield a temporary path next to `final`; rename it over `final` only if the block finishes."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(final, text):
    with atomic_path(final) as tmp:
        Path(tmp).write_text(text)


def repo_corpus(backbone_spec) -> Path:
    """The committed distillation corpus for a packaged backbone (corpora/<spec> beside the package), where the
    checkout has one."""
    return Path(__file__).resolve().parents[1] / "corpora" / backbone_spec.replace(":", "-").replace("/", "_")
