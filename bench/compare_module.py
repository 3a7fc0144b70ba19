"""bench/compare loaded as a module, for the bench tools that reuse its
daemon lookup (find_daemon) and CPU accounting (proc_cpu_seconds)."""

import importlib.machinery
import importlib.util
from pathlib import Path


def _load():
    path = Path(__file__).resolve().parent / "compare"
    loader = importlib.machinery.SourceFileLoader("bench_compare", str(path))
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


compare = _load()
