"""The embedded stack: Apache Kafka (or Tansu), PostgreSQL and Triton as local processes on 127.0.0.1."""

from livehost.stack.manager import COMPONENTS, StackInfo, down, status, up
from livehost.stack.process import Running, StackError

__all__ = ["COMPONENTS", "Running", "StackError", "StackInfo", "down", "status", "up"]
