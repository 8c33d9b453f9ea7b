"""The evaluation runner: cases (eval/CASES.md) through the real request path, in process."""

from livehost.runner.api import run_cases, sample_case

__all__ = ["run_cases", "sample_case"]
